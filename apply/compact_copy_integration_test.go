package apply_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/apply"
)

// copyAwkwardText is a text value for row i that COPY's text format must
// escape or take literally: tabs, line breaks, backslashes, the two
// characters \N, the empty string, NULL and non-ASCII letters.
const copyAwkwardText = `CASE i % 7 WHEN 0 THEN NULL WHEN 1 THEN E'tab\there' WHEN 2 THEN E'line\nbreak\r\n'
	WHEN 3 THEN E'back\\slash \\N' WHEN 4 THEN '' WHEN 5 THEN '\N' ELSE 'ünï ' || i END`

// TestCompactionCopy: long runs of inserts within a group go to the target
// with COPY, in text and (--binary) binary format, between the group's
// multi-row deletes and updates of the same and other tables; the rows come
// out as on the source, and a COPY that fails stops the applier with an
// error naming the table and the source transaction, with nothing of that
// transaction applied and the origin where it was, until the target is
// fixed.
func TestCompactionCopy(t *testing.T) {
	t.Parallel()
	forEachVersionAndFormat(t, testCompactionCopy)
}

func testCompactionCopy(t *testing.T, version int, binary bool) {
	h := newHarness(t, version, nil, nil)
	h.both(
		`CREATE TABLE cp (id int PRIMARY KEY, t text, n numeric, b bytea, a int[], ts timestamptz, big text)`,
		`ALTER TABLE cp ALTER COLUMN big SET STORAGE EXTERNAL`,
		`CREATE TABLE cq (id bigint PRIMARY KEY, v int)`,
	)
	h.source(`CREATE PUBLICATION pub FOR TABLE cp, cq`)
	h.createSlot("cp")
	row := `SELECT i, ` + copyAwkwardText + `, i / 7.0, CASE WHEN i % 5 = 0 THEN NULL ELSE decode(md5(i::text), 'hex') END,
		ARRAY[i, NULL, -i], timestamptz '2026-01-01 00:00:00+00' + i * interval '1 hour', NULL FROM generate_series`
	h.source(`INSERT INTO cp `+row+`(1, 100) i`, `INSERT INTO cq SELECT i, i FROM generate_series(1, 50) i`)
	rec := &recorder{}
	cfg := h.config("cp", "pub")
	cfg.Binary = binary
	cfg.Observer = rec
	stop := h.runApplier(cfg)
	h.waitCaughtUp("cp", time.Minute)
	// Rows that exist before the group: an even one is deleted and
	// inserted anew (a DELETE, then the COPY, in one batch).
	h.source(`BEGIN;
		UPDATE cq SET v = -v WHERE id <= 10;
		DELETE FROM cp WHERE id % 2 = 0;
		INSERT INTO cp ` + row + `(2, 100, 2) i;
		UPDATE cp SET t = 'replaced ' || id WHERE id % 2 = 0;
		INSERT INTO cp ` + row + `(101, 600) i;
		UPDATE cp SET t = t || ' updated' WHERE id BETWEEN 101 AND 120;
		UPDATE cp SET big = repeat('z', 100000) WHERE id = 300;
		UPDATE cp SET n = -1 WHERE id = 300;
		DELETE FROM cp WHERE id BETWEEN 590 AND 600;
		INSERT INTO cq SELECT i, i FROM generate_series(51, 250) i;
		COMMIT;`)
	h.waitCaughtUp("cp", time.Minute)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	const cols = "id, t, n, b, a, ts, md5(big)"
	if n := h.compare(tableRows("cp", cols)); n != 589 {
		t.Errorf("cp: %d rows, want 589", n)
	}
	if n := h.compare(tableRows("cq", "")); n != 250 {
		t.Errorf("cq: %d rows, want 250", n)
	}
	var copied int64
	for _, s := range rec.stats {
		copied += s.CopiedRows.Load()
	}
	// 100 and then 50 + 489 rows of cp and 200 of cq in runs long enough
	// for COPY; the 50 rows of cq's first run take the ordinary path.
	if copied != 100+50+489+200 {
		t.Errorf("%d rows copied, want %d", copied, 100+50+489+200)
	}

	// A duplicate key in the middle of a copied run.
	h.target(`INSERT INTO cq VALUES (1000, 0)`)
	before := h.originProgress("cp")
	h.source(`BEGIN;
		UPDATE cp SET t = 'not applied' WHERE id = 1;
		INSERT INTO cq SELECT i, i FROM generate_series(901, 1100) i;
		COMMIT;`)
	err := runUntilError(t, cfg)
	var te *apply.TxnError
	if !errors.As(err, &te) || te.CommitLSN == 0 || !strings.Contains(err.Error(), `"public"."cq"`) ||
		!strings.Contains(err.Error(), "COPY") || !strings.Contains(err.Error(), "duplicate key") {
		t.Fatalf("duplicate key in a COPY: want a TxnError naming the COPY into public.cq and the key, got %v", err)
	}
	t.Logf("duplicate key in a COPY: %v", err)
	if after := h.originProgress("cp"); after != before {
		t.Errorf("origin moved from %s to %s past the failed transaction", before, after)
	}
	h.expect(`SELECT (t = 'not applied')::text FROM cp WHERE id = 1`, "false")
	h.target(`DELETE FROM cq WHERE id = 1000`)
	stop = h.runApplier(cfg)
	h.waitCaughtUp("cp", time.Minute)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	h.compare(tableRows("cp", cols))
	if n := h.compare(tableRows("cq", "")); n != 450 {
		t.Errorf("cq: %d rows, want 450", n)
	}
}

// TestRowSecurityNoCopy: a target table with row-level security enabled,
// replicated by a role its policies apply to, takes its inserts by INSERT
// on both paths that would use COPY (a long run in a group, a streamed
// transaction), because COPY FROM refuses such a table where INSERT
// applies the policies; a table without it still gets COPY.
func TestRowSecurityNoCopy(t *testing.T) {
	t.Parallel()
	forEachVersionAndFormat(t, func(t *testing.T, version int, binary bool) {
		h := newHarness(t, version, streamSettings(version), nil)
		h.both(`CREATE TABLE rls_t (id int PRIMARY KEY, v text)`, `CREATE TABLE plain_t (id int PRIMARY KEY, v text)`)
		h.source(`CREATE PUBLICATION pub FOR TABLE rls_t, plain_t`)
		h.createSlot("rls")
		h.target(`CREATE ROLE rls_applier LOGIN`,
			`GRANT CREATE ON DATABASE postgres TO rls_applier`,
			`GRANT EXECUTE ON FUNCTION pg_catalog.pg_replication_origin_create(text) TO rls_applier`,
			`GRANT EXECUTE ON FUNCTION pg_catalog.pg_replication_origin_session_setup(text) TO rls_applier`,
			`GRANT EXECUTE ON FUNCTION pg_catalog.pg_replication_origin_xact_setup(pg_lsn, timestamptz) TO rls_applier`,
			`GRANT EXECUTE ON FUNCTION pg_catalog.pg_replication_origin_progress(text, boolean) TO rls_applier`,
			`GRANT EXECUTE ON FUNCTION pg_catalog.pg_replication_origin_session_reset() TO rls_applier`,
			`GRANT EXECUTE ON FUNCTION pg_catalog.pg_replication_origin_session_is_setup() TO rls_applier`,
			`GRANT EXECUTE ON FUNCTION pg_catalog.pg_replication_origin_advance(text, pg_lsn) TO rls_applier`,
			`GRANT SET ON PARAMETER session_replication_role TO rls_applier`,
			`GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON rls_t, plain_t TO rls_applier`,
			`ALTER TABLE rls_t ENABLE ROW LEVEL SECURITY`,
			`CREATE POLICY replicate ON rls_t TO rls_applier USING (true) WITH CHECK (true)`)
		// Without streaming every transaction reaches the group path; with
		// it (at once on 16+, past 64kB on 15) the streamed one.
		for n, streaming := range []string{"off", "on"} {
			base := strconv.Itoa(n * 10000)
			for _, table := range []string{"rls_t", "plain_t"} {
				h.source(`INSERT INTO `+table+` SELECT i + `+base+`, 'grouped ' || i FROM generate_series(1, 200) i`,
					`INSERT INTO `+table+` SELECT i + 1000 + `+base+`, repeat('s', 100) FROM generate_series(1, 2000) i`)
			}
			rec := &recorder{}
			cfg, _ := h.streamConfig("rls", streaming, "pub")
			cfg.Target = secUserURL(h.pair.Target, "rls_applier", "")
			cfg.Binary = binary
			cfg.Observer = rec
			stop := h.runApplier(cfg)
			h.waitCaughtUp("rls", time.Minute)
			if err := stop(); err != nil {
				t.Fatalf("streaming %s: %v", streaming, err)
			}
			h.compare(tableRows("rls_t", ""))
			h.compare(tableRows("plain_t", ""))
			// plain_t's rows went by COPY (streamed: but for the first rows
			// of each streamed chunk, internal/engine/stream_copy.go); one COPY into rls_t
			// would have stopped the applier.
			var copied int64
			for _, s := range rec.stats {
				copied += s.CopiedRows.Load()
			}
			if copied < 1000 || copied > 2200 {
				t.Errorf("streaming %s: %d rows copied, want most of plain_t's 2200 and none of rls_t's", streaming, copied)
			}
		}
	})
}
