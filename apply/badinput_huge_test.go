package apply_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/testenv"
)

// hugeValue replicates one text value of size bytes, then an update of
// another column of its row (the value travels as unchanged TOAST) and a
// small row after it. Either all of it arrives intact, or walapply stops
// with a permanent error, nothing of the failed transaction applied and
// the origin before it.
func hugeValue(t *testing.T, version, size int, source map[string]string) {
	h := newHarness(t, version, source, nil)
	h.both(`CREATE TABLE big (id int PRIMARY KEY, note text, v text)`)
	h.source(`CREATE PUBLICATION pub FOR TABLE big`)
	h.createSlot("huge")
	h.source(`INSERT INTO big VALUES (0, 'before', 'x')`)
	cfg := h.secConfig("huge", "pub", nil)
	stop := h.runApplier(cfg)
	if err := h.waitConfirmed("huge", time.Minute, h.applierStopped); err != nil {
		t.Fatal(err)
	}
	before := h.secOrigin("huge")
	// 16 distinct bytes repeated: the source compresses it in TOAST, but
	// decoding hands the whole value to the stream.
	h.source(fmt.Sprintf(`INSERT INTO big VALUES (1, 'a', repeat('0123456789abcdef', %d))`, size/16),
		`UPDATE big SET note = 'b' WHERE id = 1`,
		`INSERT INTO big VALUES (2, 'after', 'y')`)
	err := h.waitConfirmed("huge", 10*time.Minute, h.applierStopped)
	stopErr := stop()
	query := `SELECT id || ' ' || note || ' ' || length(v) || ' ' || md5(v) FROM big`
	if err == nil {
		if stopErr != nil {
			t.Fatal(stopErr)
		}
		if n := h.compare(query); n != 3 {
			t.Errorf("%d rows, want 3", n)
		}
		t.Logf("a %d MB value replicated intact", size>>20)
		return
	}
	// Failed: it must say so clearly and lose nothing.
	t.Logf("a %d MB value: %v", size>>20, err)
	if apply.IsTransient(err) {
		t.Errorf("the error is transient: %v", err)
	}
	if after := h.secOrigin("huge"); after != before {
		t.Errorf("origin moved from %s to %s past the failed transaction", before, after)
	}
	h.expect(`SELECT id::text FROM big`, "0")
}

// TestHugeValue: a 100 MB text value (a 1 GB one with WALAPPLY_BENCH=1,
// which takes minutes: 110 s on PostgreSQL 15, 220 s on 18, on a busy
// 2-core machine, the applier at 3.2 GB resident).
func TestHugeValue(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		t.Run("100MB", func(t *testing.T) { hugeValue(t, version, 100<<20, nil) })
		t.Run("1GB", func(t *testing.T) {
			if os.Getenv("WALAPPLY_BENCH") != "1" {
				t.Skip("a 1 GB value takes minutes and several GB of memory; set WALAPPLY_BENCH=1 to run it")
			}
			// The largest text PostgreSQL can hold is 1 GB less its
			// 4-byte header. Storing it takes the target about a minute,
			// during which walapply waits for the INSERT and sends the
			// source no feedback: past wal_sender_timeout (60s by
			// default) the source drops the connection and walapply
			// starts the transaction over, for ever. Values this large
			// need a longer wal_sender_timeout on the source.
			hugeValue(t, version, 1<<30-64, map[string]string{"wal_sender_timeout": "0"})
		})
	})
}

// TestWideRow: rows of 1,600 columns, the most a table can have, with a
// primary key and with REPLICA IDENTITY FULL (an UPDATE then has 3,200
// parameters).
func TestWideRow(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		const n = 1600
		var defs, sel []string
		for i := 1; i < n; i++ {
			defs = append(defs, fmt.Sprintf("c%d int", i))
			sel = append(sel, fmt.Sprintf("g * %d", i))
		}
		h.both(
			`CREATE TABLE wide (id int PRIMARY KEY, `+strings.Join(defs, ", ")+`)`,
			`CREATE TABLE wide_full (id int, `+strings.Join(defs, ", ")+`)`,
			`ALTER TABLE wide_full REPLICA IDENTITY FULL`)
		h.source(`CREATE PUBLICATION pub FOR TABLE wide, wide_full`)
		if got := h.rows(h.pair.Source, `SELECT count(*)::text FROM pg_attribute WHERE attrelid = 'wide_full'::regclass AND attnum > 0`); got[0] != "1600" {
			t.Fatalf("wide_full has %s columns", got[0])
		}
		h.createSlot("wide")
		stop := h.runApplier(h.secConfig("wide", "pub", nil))
		for _, tbl := range []string{"wide", "wide_full"} {
			h.source(fmt.Sprintf(`INSERT INTO %s SELECT g, %s FROM generate_series(1, 20) g`, tbl, strings.Join(sel, ", ")),
				fmt.Sprintf(`UPDATE %s SET c1599 = -1, c800 = NULL WHERE id = 2`, tbl),
				fmt.Sprintf(`UPDATE %s SET id = 200 WHERE id = 3`, tbl),
				fmt.Sprintf(`DELETE FROM %s WHERE id = 4`, tbl))
		}
		h.waitCaughtUp("wide", time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		for _, tbl := range []string{"wide", "wide_full"} {
			if rows := h.compare(tableRows(tbl, "")); rows != 19 {
				t.Errorf("%s: %d rows, want 19", tbl, rows)
			}
		}
	})
}
