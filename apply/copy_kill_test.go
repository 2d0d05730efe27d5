package apply_test

import (
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/testenv"
)

// TestCopyResumeAfterKill kills walapply with SIGKILL in the middle of
// copying a table, while the source is written to, and starts it again:
// the copy restarts only the table that had not finished, in a new
// snapshot, and the changes that snapshot already holds are not applied a
// second time from the stream (new rows would collide with their copies).
func TestCopyResumeAfterKill(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		const bigRows = 50_000
		h := newHarness(t, version, map[string]string{"logical_decoding_work_mem": "64kB"}, nil)
		h.copySchema(bigRows)
		// The copy of big stops in the middle, at the rows from 20000 on,
		// for as long as the test holds advisory lock 4242: an ALWAYS
		// trigger fires under session_replication_role = replica too.
		h.target(
			`CREATE FUNCTION hold_copy() RETURNS trigger LANGUAGE plpgsql AS $$
			 BEGIN
			   IF NEW.id BETWEEN 20000 AND 30000 THEN PERFORM pg_advisory_xact_lock_shared(4242); END IF;
			   RETURN NEW;
			 END $$`,
			`CREATE TRIGGER hold_copy BEFORE INSERT ON big FOR EACH ROW EXECUTE FUNCTION hold_copy()`,
			`ALTER TABLE big ENABLE ALWAYS TRIGGER hold_copy`,
		)
		lock, err := h.pair.Target.Connect(h.ctx, "postgres")
		if err != nil {
			t.Fatal(err)
		}
		defer lock.Close(h.ctx)
		if _, err := lock.Exec(h.ctx, `SELECT pg_advisory_lock(4242)`); err != nil {
			t.Fatal(err)
		}

		w := h.startCopyWriter(copyStep(bigRows))
		if err := w.waitMore(20); err != nil {
			t.Fatal(err)
		}
		p := h.applierProcess("cslot", "pub,pubp", "--copy", "--copy-workers", "2")
		p.start()

		// Every other table copied, big's copy waiting in the middle.
		h.waitTarget(t, p, `SELECT (SELECT count(*) FROM walapply.copy_state WHERE status = 'done') = 4
			AND EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted)`)
		p.kill()
		// Changes to every table, big included, after the slot's
		// consistent point and before the resumed copy's snapshot: in the
		// stream from the slot, and in big's new copy.
		if err := w.waitMore(60); err != nil {
			t.Fatal(err)
		}
		if _, err := lock.Exec(h.ctx, `SELECT pg_advisory_unlock(4242)`); err != nil {
			t.Fatal(err)
		}
		// The killed process's COPY aborts once it gets the lock and finds
		// its client gone.
		h.waitTarget(t, nil, `SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name LIKE 'walapply % copy %')`)
		h.expect(`SELECT table_name || ' ' || status FROM walapply.copy_state`,
			"big pending", "filtered done", "gen done", "parted done", "small done")

		p.start()
		h.waitCopyDone(3*time.Minute, p)
		if err := w.waitMore(50); err != nil {
			t.Fatal(err)
		}
		if err := w.finish(); err != nil {
			t.Fatal(err)
		}
		unwatch := h.watchProcess(p)
		h.waitCaughtUp("cslot", 3*time.Minute)
		unwatch()
		p.stop()
		n := h.compareCopy()

		// Only big was copied again, in a later snapshot; the temporary
		// slot that exported it is gone.
		h.expect(`SELECT s.table_name || ' ' || CASE WHEN s.copy_lsn = c.consistent_point THEN 'slot snapshot'
			WHEN s.copy_lsn > c.consistent_point THEN 'later snapshot' ELSE 'earlier?' END
			FROM walapply.copy_state s JOIN walapply.copies c USING (applier)`,
			"big later snapshot", "filtered slot snapshot", "gen slot snapshot", "parted slot snapshot", "small slot snapshot")
		if got := h.rows(h.pair.Source, `SELECT slot_name::text FROM pg_replication_slots`); len(got) != 1 || got[0] != "cslot" {
			t.Errorf("slots on the source: %q, want only cslot", got)
		}
		t.Logf("PostgreSQL %d: copy killed mid-table and resumed; %d concurrent transactions, %d rows compared, all equal", version, w.commits.Load(), n)
	})
}

// waitTarget polls a boolean query on the target until it is true. p, if
// not nil, is an applier process that must not exit meanwhile.
func (h *harness) waitTarget(t *testing.T, p *applierProcess, query string) {
	t.Helper()
	conn, err := h.pair.Target.Connect(h.ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(h.ctx)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var ok bool
		if err := conn.QueryRow(h.ctx, query).Scan(&ok); err != nil && !strings.Contains(err.Error(), "does not exist") {
			t.Fatalf("%s: %v", query, err) // (walapply's tables appear when it starts)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still false after 2 minutes: %s", query)
		}
		if p != nil {
			if ok, err := p.exited(); ok {
				t.Fatalf("the applier process exited (%v) while waiting for: %s", err, query)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// exited reports whether the process has exited, without consuming the
// result that kill and stop wait for.
func (p *applierProcess) exited() (bool, error) {
	if p.proc == nil {
		return true, nil
	}
	return p.proc.Exited()
}

// watchProcess makes the harness's waits fail fast when the applier
// process exits (it stops by itself only on a permanent error), until the
// returned function is called.
func (h *harness) watchProcess(p *applierProcess) (unwatch func()) {
	exited := make(chan error, 1)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				if ok, err := p.exited(); ok {
					exited <- err
					return
				}
			}
		}
	}()
	h.applierDone = exited
	return func() { close(stop); <-done; h.applierDone = nil }
}
