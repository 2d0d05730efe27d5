package bench

import (
	"errors"
	"slices"
	"testing"
)

func TestOptionsDefaultsAndErrors(t *testing.T) {
	o, err := Options{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.Appliers, []Applier{Builtin, Walapply}) || !slices.Equal(o.Versions, []int{15, 18}) ||
		o.Runs != 3 || o.Scale != 1 || len(o.Workloads) != len(WorkloadNames()) || o.Streaming != "on" {
		t.Errorf("defaults: %+v", o)
	}
	if o, err := (Options{Appliers: []Applier{Walapply}}).withDefaults(); err != nil || !slices.Equal(o.Appliers, []Applier{Walapply}) {
		t.Errorf("walapply alone: %v, %v", o.Appliers, err)
	}
	if o, err := (Options{Streaming: "parallel", Versions: []int{18}}).withDefaults(); err != nil || o.Streaming != "parallel" {
		t.Errorf("streaming parallel on 18: %v, %v", o.Streaming, err)
	}
	for name, bad := range map[string]Options{
		"applier":        {Appliers: []Applier{"logical"}},
		"workload":       {Workloads: []string{"tpcc"}},
		"version":        {Versions: []int{14}},
		"runs":           {Runs: -1},
		"scale":          {Scale: -0.5},
		"streaming":      {Streaming: "fast"},
		"parallel on 15": {Streaming: "parallel", Versions: []int{15, 18}},
	} {
		if _, err := bad.withDefaults(); !errors.Is(err, ErrOptions) {
			t.Errorf("%s: %v, want ErrOptions", name, err)
		}
	}
}
