package apply_test

import (
	"os"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/walapply/walapply/testenv"
)

func TestZZProf(t *testing.T) {
	if os.Getenv("ZZPROF") == "" {
		t.Skip()
	}
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		h.both(`CREATE TABLE big (id bigint PRIMARY KEY, payload text)`)
		h.source(`CREATE PUBLICATION pub FOR TABLE big`)
		h.createSlot("p")
		cfg, _ := h.streamConfig("p", "on", "pub")
		cfg.Logger = cfg.Logger.Level(1)
		stop := h.runApplier(cfg)
		time.Sleep(time.Second)
		f, _ := os.Create("/tmp/prof/cpu.out")
		pprof.StartCPUProfile(f)
		start := time.Now()
		h.source(`INSERT INTO big SELECT g, repeat(md5(g::text), 8) FROM generate_series(1, 400000) g`)
		t.Logf("insert %s", time.Since(start))
		h.waitCaughtUp("p", 5*time.Minute)
		t.Logf("total %s", time.Since(start))
		pprof.StopCPUProfile()
		stop()
	})
}
