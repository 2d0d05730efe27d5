package apply_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/internal/testutil"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
	"github.com/walapply/walapply/testenv"
)

// skipConfig is cfg with --skip-lsn lsn and a log of its own.
func (h *harness) skipConfig(cfg apply.Config, lsn protocol.LSN) (apply.Config, *testutil.LogBuffer) {
	cfg.SkipLSN = lsn
	logs := &testutil.LogBuffer{}
	cfg.Logger = zerolog.New(zerolog.MultiLevelWriter(zerolog.NewTestWriter(h.t), logs)).Level(zerolog.InfoLevel)
	return cfg, logs
}

// originLSN is the progress of applier name's origin on the target.
func (h *harness) originLSN(name string) protocol.LSN {
	h.t.Helper()
	origin, err := state.OriginName(name)
	if err != nil {
		h.t.Fatal(err)
	}
	lsn, err := protocol.ParseLSN(h.scalar(false, "SELECT pg_replication_origin_progress($1, true)::text", origin))
	if err != nil {
		h.t.Fatal(err)
	}
	return lsn
}

// txnError is the TxnError that stopped the applier.
func txnError(t *testing.T, err error) *apply.TxnError {
	t.Helper()
	var te *apply.TxnError
	if !errors.As(err, &te) {
		t.Fatalf("want a transaction's error to stop the applier, got %v", err)
	}
	return te
}

// skipRecords reads the uses of --skip-lsn recorded on the target.
func (h *harness) skipRecords() []string {
	return h.rows(h.pair.Target, `SELECT kind || ' ' || source_xid || ' ' || COALESCE(key, '-') FROM walapply.conflicts WHERE kind LIKE 'skip%'`)
}

// TestSkipLSNStrict: --skip-lsn is refused at or below the origin's
// progress, says so when it does not name the failing transaction, skips
// once, is ignored (with a warning) once used, and is spent when the
// stream passes it without a match.
func TestSkipLSNStrict(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		h.both(`CREATE TABLE t (id int PRIMARY KEY)`)
		h.source(`CREATE PUBLICATION pub FOR TABLE t`)
		h.target(`INSERT INTO t VALUES (2)`)
		h.createSlot("s")
		h.source(`INSERT INTO t VALUES (1)`, `BEGIN; INSERT INTO t VALUES (2); INSERT INTO t VALUES (3); COMMIT;`)
		base := h.config("s", "pub")
		te := txnError(t, runUntilError(t, base))
		origin := h.originLSN("s")

		// At or below the origin's progress: refused, naming both LSNs.
		cfg, _ := h.skipConfig(base, 1)
		err := runUntilError(t, cfg)
		var pe *apply.PermanentError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), "--skip-lsn 0/1 is at or below") ||
			!strings.Contains(err.Error(), origin.String()) || !strings.Contains(err.Error(), "WALAPPLY_SKIP_LSN") {
			t.Fatalf("--skip-lsn 0/1 with the origin at %s: got %v", origin, err)
		}
		t.Logf("--skip-lsn 0/1: %v", err)

		// Above the origin, not the failing transaction: the error says so.
		cfg, _ = h.skipConfig(base, 0xDEADBEEF)
		te2 := txnError(t, runUntilError(t, cfg))
		if te2.CommitLSN != te.CommitLSN || te2.SkipLSN != 0xDEADBEEF ||
			!strings.Contains(te2.Error(), "--skip-lsn 0/DEADBEEF did not match this transaction: to skip this transaction, give --skip-lsn "+te.CommitLSN.String()) {
			t.Fatalf("--skip-lsn 0/DEADBEEF: got %v", te2)
		}
		t.Logf("--skip-lsn 0/DEADBEEF: %v", te2)

		// The right LSN: skipped once, recorded.
		cfg, _ = h.skipConfig(base, te.CommitLSN)
		stop := h.runApplier(cfg)
		h.source(`INSERT INTO t VALUES (4)`)
		h.waitCaughtUp("s", time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		h.expect(tableRows("t", ""), "(1)", "(2)", "(4)")
		xid := strconv.FormatUint(uint64(te.Xid), 10)
		h.expect(`SELECT kind || ' ' || source_xid || ' ' || commit_lsn::text FROM walapply.conflicts`,
			"skipped_by_user "+xid+" "+h.scalar(false, "SELECT $1::pg_lsn::text", te.CommitLSN.String()))

		// The same flag again: a warning, and the next conflict is not skipped.
		h.target(`INSERT INTO t VALUES (10)`)
		h.source(`INSERT INTO t VALUES (10)`)
		cfg, logs := h.skipConfig(base, te.CommitLSN)
		te3 := txnError(t, runUntilError(t, cfg))
		if n := logs.Count("--skip-lsn "+te.CommitLSN.String()+" was already used at", "(transaction xid "+xid+" skipped); ignoring it", "remove it from the flags/environment"); n != 1 {
			t.Errorf("%d warnings that the skip was used", n)
		}
		if !te3.SkipSpent || !strings.Contains(te3.Error(), "give --skip-lsn "+te3.CommitLSN.String()) {
			t.Errorf("the next conflict: got %v", te3)
		}
		t.Logf("the same --skip-lsn again, and a new conflict: %v", te3)
		h.expect(tableRows("t", ""), "(1)", "(2)", "(4)", "(10)")

		// A skip LSN that no transaction has: spent by the first applied past it.
		h.target(`DELETE FROM t WHERE id = 10`)
		between, err := protocol.ParseLSN(h.scalar(true, "SELECT pg_current_wal_lsn()::text"))
		if err != nil {
			t.Fatal(err)
		}
		cfg, logs = h.skipConfig(base, between)
		stop = h.runApplier(cfg)
		h.source(`INSERT INTO t VALUES (11)`)
		h.waitCaughtUp("s", time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		h.expect(tableRows("t", ""), "(1)", "(2)", "(4)", "(10)", "(11)")
		if n := logs.Count("--skip-lsn passed without a match", between.String()); n != 1 {
			t.Errorf("%d warnings that the skip LSN was passed", n)
		}
		recs := h.skipRecords()
		if len(recs) != 2 || !strings.HasSuffix(recs[0], " "+between.String()) || recs[1] != "skipped_by_user "+xid+" -" {
			t.Errorf("recorded uses: %q", recs)
		}
		cfg, logs = h.skipConfig(base, between)
		stop = h.runApplier(cfg)
		h.source(`INSERT INTO t VALUES (12)`)
		h.waitCaughtUp("s", time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if n := logs.Count("--skip-lsn "+between.String()+" was passed without a match", "ignoring it"); n != 1 {
			t.Errorf("%d warnings that the passed skip LSN is ignored", n)
		}
		h.expect(tableRows("t", ""), "(1)", "(2)", "(4)", "(10)", "(11)", "(12)")
	})
}

// TestSkipLSNStreamedAndPrepared: --skip-lsn skips a streamed transaction
// at its Stream Commit, and a prepared one (streamed or not) at its PREPARE
// by its prepare LSN, whose COMMIT PREPARED then does nothing; each once.
func TestSkipLSNStreamedAndPrepared(t *testing.T) {
	t.Parallel()
	big := `INSERT INTO t SELECT g, repeat('x', 100) FROM generate_series(1, 3000) g`
	for _, c := range []struct {
		name              string
		streamed, prepare bool
	}{{"streamed", true, false}, {"prepared", false, true}, {"streamed-prepared", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			testenv.ForEachVersion(t, func(t *testing.T, version int) {
				var settings map[string]string
				if c.streamed {
					settings = streamSettings(version)
				}
				h := newHarness(t, version, settings, nil)
				h.both(`CREATE TABLE t (id int PRIMARY KEY, pad text)`)
				h.source(`CREATE PUBLICATION pub FOR TABLE t`)
				h.target(`INSERT INTO t VALUES (5, 'target')`)
				base := h.config("s", "pub")
				if c.prepare {
					h.twoPhaseSlot("s")
					base.TwoPhase = true
				} else {
					h.createSlot("s")
				}
				if c.streamed {
					base, _ = h.streamConfig("s", "on", "pub")
					base.TwoPhase = c.prepare
				}
				if c.prepare {
					h.prepareOnSource("g1", big)
				} else {
					h.source(big)
				}
				te := txnError(t, runUntilError(t, base))
				if !strings.Contains(te.Error(), "23505") {
					t.Fatalf("want the duplicate key to stop the applier, got %v", te)
				}
				cfg, logs := h.skipConfig(base, te.CommitLSN)
				stop := h.runApplier(cfg)
				h.waitCaughtUp("s", time.Minute)
				h.expectNonePrepared()
				if c.prepare {
					h.source(`COMMIT PREPARED 'g1'`)
					h.waitLog(logs, time.Minute, "skipped at its PREPARE by --skip-lsn")
				}
				if err := stop(); err != nil {
					t.Fatal(err)
				}
				if c.streamed {
					if n, _ := strconv.Atoi(h.streamedTxns("s")); n < 1 {
						t.Fatalf("the source streamed %d transactions; the test needs streaming", n)
					}
				}
				h.expect(tableRows("t", "id, pad"), "(5,target)")
				h.expect(`SELECT kind || ' ' || source_xid FROM walapply.conflicts`, "skipped_by_user "+strconv.FormatUint(uint64(te.Xid), 10))

				// The same flag again: ignored; the next one is applied.
				cfg, logs = h.skipConfig(base, te.CommitLSN)
				stop = h.runApplier(cfg)
				h.source(`INSERT INTO t VALUES (5001, 'source')`)
				h.waitCaughtUp("s", time.Minute)
				if err := stop(); err != nil {
					t.Fatal(err)
				}
				if n := logs.Count("--skip-lsn "+te.CommitLSN.String()+" was already used at", "ignoring it"); n != 1 {
					t.Errorf("%d warnings that the skip was used", n)
				}
				h.expect(tableRows("t", "id, pad"), "(5,target)", "(5001,source)")
			})
		})
	}
}
