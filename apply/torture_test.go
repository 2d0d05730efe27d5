//go:build linux

package apply_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/internal/faultproxy"
	"github.com/walapply/walapply/testenv"
)

// tortureConfig sizes a torture run.
type tortureConfig struct {
	name      string
	duration  time.Duration // of the workload
	clients   int
	tables    int
	minFaults int
	// underFire bounds how long faults go on after the workload, while
	// the applier catches up; catchUp bounds the wait for it after them.
	underFire time.Duration
	catchUp   time.Duration
}

// tortureSettings picks the short run (the default, part of `make test`)
// or the long one (WALAPPLY_TORTURE=long, `make torture`), whose workload
// lasts WALAPPLY_TORTURE_DURATION (default 10m).
func tortureSettings(t *testing.T) tortureConfig {
	t.Helper()
	switch mode := os.Getenv("WALAPPLY_TORTURE"); mode {
	case "", "short":
		return tortureConfig{name: "short", duration: 30 * time.Second, clients: 3, tables: 6, minFaults: len(faultKinds),
			underFire: 20 * time.Second, catchUp: 3 * time.Minute}
	case "long":
		d := 10 * time.Minute
		if s := os.Getenv("WALAPPLY_TORTURE_DURATION"); s != "" {
			var err error
			if d, err = time.ParseDuration(s); err != nil {
				t.Fatalf("WALAPPLY_TORTURE_DURATION=%q: %v", s, err)
			}
		}
		return tortureConfig{name: "long", duration: d, clients: 4, tables: 12, minFaults: 50,
			underFire: 10 * time.Minute, catchUp: 10 * time.Minute}
	default:
		t.Fatalf("WALAPPLY_TORTURE=%q: want short or long", mode)
		return tortureConfig{}
	}
}

// tortureSeed is the workload's random seed: WALAPPLY_TORTURE_SEED, or a
// new one, logged either way.
func tortureSeed(t *testing.T) uint64 {
	t.Helper()
	if s := os.Getenv("WALAPPLY_TORTURE_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("WALAPPLY_TORTURE_SEED=%q: %v", s, err)
		}
		return seed
	}
	return rand.Uint64()
}

// TestTorture replicates a mixed workload (small, streamed and prepared
// transactions over many tables, several clients) while faults hit every
// party at random: SIGKILL of the applier, crashes of the target and of the
// source, network cuts, half-closed connections and stalls longer than
// wal_sender_timeout between the applier and either server (through
// faultproxy), and a full disk under the spill directory (the process's
// RLIMIT_FSIZE lowered for a while, so that spill writes fail with EFBIG:
// unlike permissions, which root ignores, or a small filesystem, which
// needs a mount, it works anywhere and can be lifted again). The applier
// runs as its own process with --streaming on and --two-phase, so every
// path is hit. At the end every table must be the same on both sides row for row
// (nothing missing, nothing twice), nothing may be left prepared on the
// target, and no spill file may be left behind.
//
// The short run (30s of workload, each fault kind at least once) is part
// of the ordinary test run; WALAPPLY_TORTURE=long runs the long one (see
// tortureSettings). Both print their fault counts and the comparison
// (go test -v).
func TestTorture(t *testing.T) {
	t.Parallel()
	testenv.SkipShort(t)
	cfg := tortureSettings(t)
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		seed := tortureSeed(t)
		t.Logf("torture run %s: %s of workload, seed %d (WALAPPLY_TORTURE_SEED)", cfg.name, cfg.duration, seed)
		ctx := context.Background()
		// Big transactions stream at 64kB of decoded changes; a
		// walsender that hears nothing from the applier for 2s gives up.
		const senderTimeout = 2 * time.Second
		h := newHarness(t, version, map[string]string{"logical_decoding_work_mem": "64kB", "wal_sender_timeout": "2s"}, nil)
		tables := make([]string, cfg.tables)
		for i := range tables {
			tables[i] = fmt.Sprintf("torture_%02d", i)
			h.both(fmt.Sprintf("CREATE TABLE %s (id bigint PRIMARY KEY, client int NOT NULL, v text, n int NOT NULL DEFAULT 0)", tables[i]))
		}
		h.source("CREATE PUBLICATION torture FOR TABLE " + strings.Join(tables, ", "))
		h.twoPhaseSlot("torture")

		src, tgt := startProxy(t, h.pair.Source), startProxy(t, h.pair.Target)
		spill := filepath.Join(t.TempDir(), "spill")
		p := newTortureApplier(t, "run",
			"--source", proxiedConnString(src), "--target", proxiedConnString(tgt),
			"--slot", "torture", "--publication", "torture", "--streaming", "on", "--two-phase",
			"--spill-dir", spill, "--feedback-interval", "200ms", "--log-format", "json", "--log-level", tortureLogLevel())
		p.start()

		w := &tortureWorkload{src: h.pair.Source, tables: tables, end: time.Now().Add(cfg.duration)}
		workload := make(chan error, 1)
		go func() { workload <- w.run(ctx, cfg.clients, seed) }()
		f := &tortureFaults{t: t, h: h, p: p, src: src, tgt: tgt, rng: rand.New(rand.NewPCG(seed, 1)),
			stall: senderTimeout + 500*time.Millisecond, counts: map[string]int{}}
		var drainTo string // the source's position when the workload ended
		drained := func() bool {
			if drainTo == "" {
				drainTo = h.scalar(true, "SELECT pg_current_wal_lsn()::text")
			}
			return h.scalar(true, "SELECT (confirmed_flush_lsn >= $1::pg_lsn)::text FROM pg_replication_slots WHERE slot_name = 'torture'", drainTo) == "true"
		}
		faults, faultsAfter := f.loop(workload, cfg.minFaults, drained, cfg.underFire)

		// The outcome of every source transaction is known now.
		if left := h.rows(h.pair.Source, "SELECT gid FROM pg_prepared_xacts"); len(left) != 0 {
			t.Fatalf("the workload left prepared transactions on the source: %q", left)
		}
		started := time.Now()
		waitCaughtUpProcess(h, p, "torture", cfg.catchUp)
		catchUp := time.Since(started)
		p.stop()

		total, missing, extra := 0, 0, 0
		for _, tbl := range tables {
			n, m, e := compareCounted(h, tableRows(tbl, ""))
			total, missing, extra = total+n, missing+m, extra+e
		}
		prepared := h.preparedOn(h.pair.Target)
		if len(prepared) != 0 {
			t.Errorf("prepared transactions left on the target: %q", prepared)
		}
		leftSpill := spillFiles(t, spill)
		if len(leftSpill) != 0 {
			t.Errorf("spill files left behind: %q", leftSpill)
		}
		if faults < cfg.minFaults {
			t.Errorf("%d faults, want at least %d", faults, cfg.minFaults)
		}
		srcLog, _ := h.pair.Source.Log()
		t.Logf("PostgreSQL %d, torture %s (%s of workload, %d clients, %d tables): %s; %d of them after the workload ended, while the applier caught up",
			version, cfg.name, cfg.duration, cfg.clients, cfg.tables, f.summary(), faultsAfter)
		t.Logf("source: %d walsender timeouts (wal_sender_timeout %s); proxies: source %+v, target %+v",
			strings.Count(srcLog, "terminating walsender process due to replication timeout"), senderTimeout, src.Stats(), tgt.Stats())
		t.Logf("workload: %s", w.summary())
		t.Logf("applier: %d processes, %d sessions, %d transient errors retried, %d spill writes failed with EFBIG, %d streamed transactions replayed at their commit, "+
			"%d restarts that removed a killed run's spill files, %d PREPAREs repaired, %d error lines; caught up %s after the last fault",
			p.runs, p.log.count("replicating"), p.log.count("transient error; reconnecting"), p.log.count("file too large"),
			p.log.count("replayed a streamed transaction"), p.log.count("removed spill files"), p.log.count("moved the origin back"),
			p.log.count(`"level":"error"`), catchUp.Round(100*time.Millisecond))
		// An outcome that found its prepared transaction gone, or a
		// prepared transaction that nothing will finish, means one was lost.
		for _, bad := range []string{"no longer prepared there", "leftover prepared"} {
			if n := p.log.count(bad); n != 0 {
				t.Errorf("the applier logged %d lines with %q", n, bad)
			}
		}
		conflicts, conflictTxns := checkConflicts(h, p.log.conflicts())
		t.Logf("comparison: %d tables, %d rows on the source: %d missing on the target, %d extra (twice or never on the source); %d prepared transactions left on the target; %d spill files left; "+
			"%d conflicts (rows missing), all in %d transactions the source rolled back",
			len(tables), total, missing, extra, len(prepared), len(leftSpill), conflicts, conflictTxns)
	})
}

// tortureLogLevel is the applier's log level: WALAPPLY_TORTURE_LOG, or info.
func tortureLogLevel() string {
	if l := os.Getenv("WALAPPLY_TORTURE_LOG"); l != "" {
		return l
	}
	return "info"
}

// checkConflicts checks the conflicts the applier logged (per source xid):
// every client changes only its own rows and only the applier writes to
// the target, so an UPDATE or DELETE that finds no row there (or an INSERT
// that finds one) means that a change was lost or applied twice, even where
// the end state cannot show it (a lost INSERT of a row deleted later in
// the same transaction). There is one exception: PostgreSQL stops decoding
// a prepared (or streamed) transaction that is rolled back while it decodes
// it, and still sends its PREPARE, so that the subscriber can roll back
// what it prepared (logicaldecoding.sgml, "concurrently aborted"); such a
// transaction arrives with changes missing, and may miss rows, harmlessly.
// The torture workload makes that common: the walsender decodes behind the
// clients after every reconnect, and a quarter of the prepared transactions
// are rolled back within 50ms. So each conflicting transaction must have
// aborted on the source. It returns the number of conflicts and of
// transactions.
func checkConflicts(h *harness, byXid map[uint32]int) (conflicts, txns int) {
	h.t.Helper()
	conn := h.conn(true)
	for xid, n := range byXid {
		var status *string
		if err := conn.QueryRow(h.ctx, "SELECT pg_xact_status($1::text::xid8)", fmt.Sprint(xid)).Scan(&status); err != nil {
			h.t.Fatal(err)
		}
		if status == nil || *status != "aborted" {
			st := "of unknown status"
			if status != nil {
				st = *status
			}
			h.t.Errorf("the applier logged %d conflicts in source transaction %d, which is %s on the source: a change was lost or applied twice", n, xid, st)
		}
		conflicts += n
	}
	return conflicts, len(byXid)
}

// startProxy starts a faultproxy in front of a cluster.
func startProxy(t *testing.T, c *testenv.Cluster) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(fmt.Sprintf("127.0.0.1:%d", c.Port()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// proxiedConnString connects as postgres to database postgres through p.
func proxiedConnString(p *faultproxy.Proxy) string {
	return "postgres://postgres@" + p.Addr() + "/postgres?sslmode=disable"
}

// waitCaughtUpProcess waits until the slot has confirmed everything the
// source had written when it was called, failing if the applier process
// stops meanwhile.
func waitCaughtUpProcess(h *harness, p *tortureApplier, slot string, timeout time.Duration) {
	h.t.Helper()
	if err := h.waitConfirmed(slot, timeout, p.exited); err != nil {
		h.t.Fatalf("%v while catching up", err)
	}
}

// compareCounted compares a query's rows on source and target as
// multisets and returns how many the source has, how many of them the
// target misses and how many the target has in excess.
func compareCounted(h *harness, query string) (rows, missing, extra int) {
	h.t.Helper()
	src := h.rows(h.pair.Source, query)
	dst := h.rows(h.pair.Target, query)
	count := map[string]int{}
	for _, r := range src {
		count[r]++
	}
	for _, r := range dst {
		count[r]--
	}
	for _, c := range count {
		if c > 0 {
			missing += c
		} else {
			extra -= c
		}
	}
	if missing != 0 || extra != 0 {
		h.t.Errorf("source and target differ for %s:\n%s", query, diffRows(src, dst))
	}
	return len(src), missing, extra
}
