package apply_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/internal/spillfs"
	"github.com/walapply/walapply/state"
	"github.com/walapply/walapply/testenv"
)

// TestStreamedSpillFaults injects I/O faults into the spill files through
// spillfs.FaultFS: a disk that fills up, EIO, a short write. Each is a clear
// error, retried after reconnecting, with nothing of the transaction applied
// or confirmed meanwhile; once the fault is gone the run resumes and applies
// everything once. A spill file damaged on disk stops the run with an error
// naming it, and nothing of its transaction is applied.
func TestStreamedSpillFaults(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, streamSettings(version), nil)
		h.both(`CREATE TABLE f (id int PRIMARY KEY, v text)`)
		h.source(`CREATE PUBLICATION f FOR TABLE f`)
		h.createSlot("f")
		cfg, logs := h.streamConfig("f", "on", "f")
		fault := spillfs.NewFaultFS(spillfs.OSFS)
		apply.SetSpillFS(&cfg, fault)
		h.runApplier(cfg)
		origin, err := state.OriginName("f")
		if err != nil {
			t.Fatal(err)
		}
		progress := func() string {
			return h.scalar(false, "SELECT pg_replication_origin_progress($1, false)::text", origin)
		}
		confirmed := func() string {
			return h.scalar(true, "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = 'f'")
		}

		h.source(rowsSQL("f", 1, 2000, "before"))
		h.waitCaughtUp("f", time.Minute)
		progressBefore := progress()

		// The disk fills up after 200kB: the write that does not fit fails
		// half-written, and so does every retry.
		fault.LimitSpace(200 << 10)
		h.source(rowsSQL("f", 10001, 15000, "during"))
		line := h.waitLog(logs, time.Minute, "transient error; reconnecting", "no space left on device")
		for _, frag := range []string{filepath.Join(cfg.SpillDir, "xid-"), "free space there or point --spill-dir at a larger disk",
			"nothing of the transaction was applied or confirmed"} {
			if !strings.Contains(line, frag) {
				t.Errorf("the error does not mention %q:\n%s", frag, line)
			}
		}
		// Then the disk fails with EIO, then one write is short.
		fault.Clear()
		fault.FailWrites(syscall.EIO)
		h.waitLog(logs, time.Minute, "transient error; reconnecting", "input/output error", "spill file")
		h.expect(`SELECT count(*)::text FROM f WHERE id > 10000`, "0")
		if p := progress(); p != progressBefore {
			t.Errorf("origin progress moved from %s to %s while spilling failed", progressBefore, p)
		}
		confirmedDuring := confirmed()
		fault.Clear()
		fault.ShortWrite(100, nil)
		h.waitLog(logs, time.Minute, "transient error; reconnecting", "short write", "spill file")

		// Space is back: everything is applied, once.
		h.waitCaughtUp("f", 2*time.Minute)
		if n := h.compare(tableRows("f", "")); n != 7000 {
			t.Errorf("f has %d rows, want 7000", n)
		}
		after := progress()
		if h.scalar(true, "SELECT ($1::pg_lsn < $2::pg_lsn)::text", confirmedDuring, after) != "true" {
			t.Errorf("while spilling failed the source confirmed %s, at or past the failed transaction's end %s", confirmedDuring, after)
		}

		// A spill file damaged after it was written: the replay stops at
		// the bad record, applies nothing, and the run stops.
		src := h.conn(true)
		h.run(src, "BEGIN", rowsSQL("f", 20001, 23000, "damaged"))
		h.waitSpill(cfg.SpillDir, 8<<10, time.Minute)
		files := spillFiles(t, cfg.SpillDir)
		if len(files) != 1 {
			t.Fatalf("spill files %v, want one", files)
		}
		path := filepath.Join(cfg.SpillDir, files[0])
		flipByte(t, path, 4000)
		h.run(src, "COMMIT")
		var runErr error
		select {
		case runErr = <-h.applierDone:
		case <-time.After(time.Minute):
			t.Fatal("the applier did not stop at the damaged spill file")
		}
		t.Logf("run error, as expected: %v", runErr)
		var se *apply.SpillError
		if !errors.Is(runErr, state.ErrSpillCorrupt) || !errors.As(runErr, &se) || se.Path != path || apply.IsTransient(runErr) {
			t.Fatalf("run error %v; want a permanent SpillError for %s", runErr, path)
		}
		if msg := runErr.Error(); !strings.Contains(msg, "checksum mismatch") || !strings.Contains(msg, "nothing of the transaction was applied") {
			t.Errorf("run error %q does not say what happened", msg)
		}
		h.expect(`SELECT count(*)::text FROM f WHERE id > 20000`, "0")
		if p := progress(); p != after {
			t.Errorf("origin progress moved from %s to %s for the damaged transaction", after, p)
		}
	})
}

// flipByte inverts the byte at off of a file.
func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}
