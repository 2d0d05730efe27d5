package apply_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/walapply/walapply/testenv"
)

// TestStreamedKill streams a 200k-row transaction and SIGKILLs the applier
// twice: in the middle of the stream (the source transaction still open,
// half of it spilled) and in the middle of the replay at its commit (the
// target transaction open). Afterwards the target has exactly the 200k
// rows, none twice.
//
// Only logical_decoding_work_mem forces streaming here, also on 16+:
// debug_logical_replication_streaming = immediate would send every row in a
// stream block of its own, which takes the source far longer than this
// test needs.
func TestStreamedKill(t *testing.T) {
	t.Parallel()
	testenv.SkipShort(t)
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, map[string]string{"logical_decoding_work_mem": "64kB"}, nil)
		h.both(`CREATE TABLE big (id int PRIMARY KEY, v text)`)
		h.source(`CREATE PUBLICATION big FOR TABLE big`)
		h.createSlot("big")
		spill := filepath.Join(t.TempDir(), "spill")
		p := h.applierProcess("big", "big", "--spill-dir", spill, "--streaming", "on")
		p.start()

		// Kill 1: while the first half is being inserted and streamed.
		src := h.conn(true)
		h.run(src, "BEGIN")
		inserted := make(chan error, 1)
		go func() {
			_, err := src.Exec(h.ctx, rowsSQL("big", 1, 100000, "k"))
			inserted <- err
		}()
		h.waitSpill(spill, 1<<20, 2*time.Minute)
		p.kill()
		if err := <-inserted; err != nil {
			t.Fatal(err)
		}
		h.expect(`SELECT count(*)::text FROM big`, "0")
		p.start()
		// The restarted applier removes the killed one's file and receives
		// the transaction again from its first change.
		h.waitSpill(spill, 4<<20, 2*time.Minute)

		// Kill 2: in the middle of the replay at commit.
		h.run(src, rowsSQL("big", 100001, 200000, "k"), "COMMIT")
		h.waitReplay("walapply big apply", "big", 2*time.Minute)
		p.kill()
		h.expect(`SELECT count(*)::text FROM big`, "0") // the replay was cut off, not finished
		p.start()

		h.waitCaughtUp("big", 3*time.Minute)
		p.stop()
		h.expect(`SELECT count(*)::text || ' ' || count(DISTINCT id)::text || ' ' || min(id)::text || ' ' || max(id)::text FROM big`, "200000 200000 1 200000")
		sum := `SELECT md5(string_agg(id::text || ':' || v, ',' ORDER BY id)) FROM big`
		if s, d := h.scalar(true, sum), h.scalar(false, sum); s != d {
			t.Errorf("source and target rows differ: md5 %s on the source, %s on the target", s, d)
		}
		if files := spillFiles(t, spill); len(files) != 0 {
			t.Errorf("spill files left: %v", files)
		}
		log, _ := os.ReadFile(p.log.Name())
		if !bytes.Contains(log, []byte("removed spill files of streamed transactions from an earlier run")) {
			t.Error("no restart logged the removal of the killed applier's spill file")
		}
	})
}

// waitSpill waits until a spill file in dir has at least size bytes.
func (h *harness) waitSpill(dir string, size int64, timeout time.Duration) {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for _, name := range spillFiles(h.t, dir) {
			if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.Size() >= size {
				return
			}
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("no spill file of %d bytes in %s within %s", size, dir, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitReplay waits until the target session named app holds a lock on
// table: it has started writing a transaction into it.
func (h *harness) waitReplay(app, table string, timeout time.Duration) {
	h.t.Helper()
	conn := h.conn(false)
	deadline := time.Now().Add(timeout)
	for {
		var n int
		err := conn.QueryRow(h.ctx, `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE l.relation = $1::regclass AND a.application_name = $2`, table, app).Scan(&n)
		if err != nil {
			h.t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s did not start writing into %s within %s", app, table, timeout)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
