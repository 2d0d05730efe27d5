package apply_test

// Topology tests: several clusters, several appliers, origin filtering
// (docs/TOPOLOGIES.md). Each link between two clusters is a harness whose
// pair is (source, target), so the harness helpers (config, runApplier,
// waitCaughtUp, rows) work per link; a cluster is the source of one link and
// the target of another.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/testenv"
)

// topoCatchUp bounds every wait for a slot to confirm what its source has
// written; it only turns a hang into a failure.
const topoCatchUp = 90 * time.Second

// topoOriginVersion is the first source version with pgoutput's origin
// option, which origin = none needs.
const topoOriginVersion = 16

// topoClusters starts n clusters of one version.
func topoClusters(t *testing.T, version, n int) []*testenv.Cluster {
	t.Helper()
	cs := make([]*testenv.Cluster, n)
	for i := range cs {
		cs[i] = testenv.NewCluster(t, testenv.Options{Version: version})
	}
	return cs
}

// topoLink is an applier's path from source to target. Its harness's
// pair is (source, target).
func topoLink(t *testing.T, source, target *testenv.Cluster) *harness {
	return &harness{t: t, pair: &testenv.Pair{Source: source, Target: target}, ctx: context.Background()}
}

// topoConfig is the link's applier configuration: slot and applier name,
// origin filter and publications. The slot must already exist (createSlot)
// so that changes made before the applier first connects are kept for it.
func topoConfig(h *harness, name, origin string, pubs ...string) apply.Config {
	cfg := h.config(name, pubs...)
	cfg.Name = name
	cfg.Origin = origin
	cfg.CreateSlot = false
	cfg.Logger = cfg.Logger.With().Str("applier", name).Logger()
	return cfg
}

// topoRows returns a query's rows on a cluster as sorted text.
func topoRows(t *testing.T, c *testenv.Cluster, query string) []string {
	t.Helper()
	return (&harness{t: t, ctx: context.Background()}).rows(c, query)
}

// topoExpect checks a cluster's rows for a query against want (any order).
func topoExpect(t *testing.T, c *testenv.Cluster, what, query string, want []string) {
	t.Helper()
	got := topoRows(t, c, query)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Errorf("%s: rows differ from what was written:\n%s", what, diffRows(want, got))
	}
}

// topoSettle waits, link by link in the order given and twice over, until
// every slot has confirmed everything its source had written: the second
// round covers what the first round's appliers wrote into clusters that are
// themselves sources. Afterwards no change is in flight anywhere and every
// slot's lag is zero.
func topoSettle(links ...topoSlot) {
	for range 2 {
		for _, l := range links {
			l.h.t.Helper()
			l.h.waitCaughtUp(l.slot, topoCatchUp)
		}
	}
}

// topoSlot names a link and the slot its applier reads.
type topoSlot struct {
	h    *harness
	slot string
}

// topoProgress keeps what an applier's OnProgress reported.
type topoProgress struct {
	mu      sync.Mutex
	last    apply.Progress
	origins map[string]bool // every LastOrigin ever reported, "" included
}

func (p *topoProgress) record(pr apply.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last = pr
	if p.origins == nil {
		p.origins = map[string]bool{}
	}
	p.origins[pr.LastOrigin] = true
}

// waitLastOrigin waits until a progress report names origin as the last
// transaction's, and fails if the applier stops first or it never does.
func (p *topoProgress) waitLastOrigin(h *harness, origin string) {
	h.t.Helper()
	deadline := time.Now().Add(topoCatchUp)
	for {
		p.mu.Lock()
		got := p.last.LastOrigin
		p.mu.Unlock()
		if got == origin {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("the applier's progress never named origin %q for the last transaction (last report: %q)", origin, got)
		}
		select {
		case err := <-h.applierDone:
			h.t.Fatalf("the applier stopped while waiting for origin %q in its progress: %v", origin, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// seen reports every LastOrigin reported so far.
func (p *topoProgress) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.origins))
	for o := range p.origins {
		out = append(out, o)
	}
	slices.Sort(out)
	return out
}

// topoRowsText renders (id, made_on, v) rows as PostgreSQL's row text.
func topoRowsText(ids []int, madeOn string, v func(id int) int) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = fmt.Sprintf("(%d,%s,%d)", id, madeOn, v(id))
	}
	return out
}

// topoRange returns from..to inclusive.
func topoRange(from, to int) []int {
	out := make([]int, 0, to-from+1)
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// topoSkipBefore16 skips origin = none tests on sources that cannot filter.
func topoSkipBefore16(t *testing.T, version int) {
	t.Helper()
	if version < topoOriginVersion {
		t.Skipf("PostgreSQL %d: origin = none needs a PostgreSQL 16+ source (pgoutput's origin option); "+
			"TestTopologyOriginNoneOldSource checks that walapply refuses it here", version)
	}
}
