package apply_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/testenv"
)

// TestTypeErrorNamesColumn: a value the target's column rejects (too long
// for a varchar(10), out of range for an integer), in a table with two
// columns of each type, stops the applier with an error that names
// exactly that column and the value's shape, never the value, whether
// the change went as its own statement, in a compacted multi-row
// statement of a group of several transactions, in a COPY run (also of a
// streamed transaction), or as an UPDATE; the same for a domain's CHECK
// constraint, which names the domain; and nothing of the failed
// transaction is applied.
func TestTypeErrorNamesColumn(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		// Transactions past 64kB are streamed (the streamed COPY case).
		h := newHarness(t, version, map[string]string{"logical_decoding_work_mem": "64kB"}, nil)
		h.source(`CREATE TABLE tv (id int PRIMARY KEY, a text, b text, m bigint, n bigint)`,
			`CREATE TABLE mark (id int PRIMARY KEY)`, `CREATE TABLE td (id int PRIMARY KEY, x text, y text)`,
			`CREATE PUBLICATION pub FOR TABLE tv, mark, td`)
		h.target(`CREATE TABLE tv (id int PRIMARY KEY, a varchar(10), b varchar(10), m int, n int)`,
			`CREATE TABLE mark (id int PRIMARY KEY)`, `CREATE DOMAIN code AS text CHECK (VALUE <> 'bad')`,
			`CREATE TABLE td (id int PRIMARY KEY, x code, y code)`)
		long := `'` + strings.Repeat("é", 12) + `'` // 12 characters, 24 bytes
		const big = "99999999999"
		tooLong := func(col string) string {
			return `column "` + col + `" (character varying(10) on the target), a value of 12 characters: ERROR: value too long for type character varying(10) (SQLSTATE 22001)`
		}
		outOfRange := func(col string) string {
			return `column "` + col + `" (integer on the target), a number with 11 digits: ERROR: value "` + big + `" is out of range for type integer (SQLSTATE 22003)`
		}
		// row renders a source row of tv whose column bad (a, b, m or n)
		// holds a value the target rejects.
		row := func(id int, bad string) string {
			v := map[string]string{"a": "'ok'", "b": "'fine'", "m": "1", "n": "2"}
			if bad == "a" || bad == "b" {
				v[bad] = long
			} else if bad != "" {
				v[bad] = big
			}
			return fmt.Sprintf("(%d, %s, %s, %s, %s)", id, v["a"], v["b"], v["m"], v["n"])
		}
		n := 0
		// run applies what the source holds since the last run with a
		// new applier and checks that it stops on want, with the failed
		// transaction's mark (id) not applied and the table then holding
		// rows rows.
		run := func(slot, name string, noGroup bool, mark int, want string, rows int) {
			t.Helper()
			cfg := h.config(slot, "pub")
			cfg.NoGroupCommit = noGroup
			err := runUntilError(t, cfg)
			var te *apply.TxnError
			if !errors.As(err, &te) || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: want an error with\n%s\ngot %v", name, want, err)
			} else {
				t.Logf("%s: %v", name, err)
			}
			if strings.Contains(fmt.Sprint(err), "éééé") {
				t.Errorf("%s: the error shows the value: %v", name, err)
			}
			h.expect(fmt.Sprintf("SELECT count(*)::text FROM mark WHERE id = %d", mark), "0")
			h.expect("SELECT count(*)::text FROM tv", fmt.Sprint(rows))
			h.dropApplier(slot)
		}
		slot := func() string {
			n++
			name := fmt.Sprintf("te%d", n)
			h.createSlot(name)
			return name
		}

		// Plain statements, one per change: each column in turn.
		id := 0
		for _, col := range []string{"a", "b", "m", "n"} {
			name := slot()
			id += 10
			h.source(fmt.Sprintf(`BEGIN; INSERT INTO mark VALUES (%d); INSERT INTO tv VALUES %s, %s, %s; COMMIT`,
				id, row(id, ""), row(id+1, col), row(id+2, "")))
			want := `INSERT on "public"."tv": ` + tooLong(col)
			if col == "m" || col == "n" {
				want = `INSERT on "public"."tv": ` + outOfRange(col)
			}
			run(name, "plain "+col, true, id, want, 0)
		}

		// A group of several transactions, compacted into multi-row
		// statements: the earlier ones are applied, the failed one not.
		for _, col := range []string{"b", "m"} {
			name := slot()
			id += 10
			h.source(fmt.Sprintf(`INSERT INTO tv VALUES %s, %s`, row(id, ""), row(id+1, "")),
				fmt.Sprintf(`INSERT INTO tv VALUES %s, %s`, row(id+2, ""), row(id+3, "")),
				fmt.Sprintf(`BEGIN; INSERT INTO mark VALUES (%d); INSERT INTO tv VALUES %s, %s, %s; COMMIT`,
					id, row(id+4, ""), row(id+5, col), row(id+6, "")),
				fmt.Sprintf(`INSERT INTO tv VALUES %s`, row(id+7, "")))
			want := `INSERT on "public"."tv": ` + tooLong(col)
			if col == "m" {
				want = `INSERT on "public"."tv": ` + outOfRange(col)
			}
			before := len(h.rows(h.pair.Target, "SELECT id FROM tv"))
			run(name, "group "+col, false, id, want, before+4)
			h.target(fmt.Sprintf("DELETE FROM tv WHERE id >= %d", id))
		}

		// A run of inserts long enough for COPY.
		name := slot()
		id = 1000
		h.source(fmt.Sprintf(`BEGIN; INSERT INTO mark VALUES (%d);
			INSERT INTO tv SELECT g, 'ok', 'fine', g, g FROM generate_series(1000, 1099) g;
			INSERT INTO tv VALUES %s; INSERT INTO tv SELECT g, 'ok', 'fine', g, g FROM generate_series(1101, 1199) g; COMMIT`,
			id, row(1100, "a")))
		run(name, "copy", false, id, `INSERT on "public"."tv": `+tooLong("a"), 0)

		// A streamed transaction: its run of inserts goes as COPY when
		// its spill file is replayed (internal/engine/stream_copy.go).
		name = slot()
		id = 3000
		h.source(fmt.Sprintf(`BEGIN; INSERT INTO mark VALUES (%d);
			INSERT INTO tv SELECT g, 'ok', 'fine', g, g FROM generate_series(3000, 4499) g;
			INSERT INTO tv VALUES %s; INSERT INTO tv SELECT g, 'ok', 'fine', g, g FROM generate_series(4501, 4999) g; COMMIT`,
			id, row(4500, "b")))
		run(name, "streamed copy", false, id, `INSERT on "public"."tv": `+tooLong("b"), 0)

		// A domain's CHECK constraint names the domain, not the column.
		name = slot()
		id = 5000
		h.source(fmt.Sprintf(`BEGIN; INSERT INTO mark VALUES (%d); INSERT INTO td VALUES (1, 'ok', 'ok'), (2, 'ok', 'bad'); COMMIT`, id))
		run(name, "domain", false, id, `INSERT on "public"."td": column "y" (public.code on the target), a value of 3 characters: ERROR: value for domain public.code violates check constraint "code_check" (SQLSTATE 23514)`, 0)

		// UPDATE, as its own statement and compacted.
		h.target(`INSERT INTO tv VALUES (2000, 'ok', 'fine', 1, 2), (2001, 'ok', 'fine', 1, 2)`)
		h.source(`INSERT INTO tv VALUES (2000, 'ok', 'fine', 1, 2), (2001, 'ok', 'fine', 1, 2)`)
		for _, c := range []struct {
			col     string
			noGroup bool
		}{{"b", true}, {"n", false}, {"a", false}} {
			h.source(`UPDATE tv SET a = 'ok', b = 'fine', m = 1, n = 2`) // before the slot: not replayed
			name := slot()
			id += 10
			set := "b = " + long
			want := `UPDATE on "public"."tv": ` + tooLong(c.col)
			switch c.col {
			case "a":
				set = "a = " + long
			case "n":
				set = "n = " + big
				want = `UPDATE on "public"."tv": ` + outOfRange("n")
			}
			h.source(fmt.Sprintf(`BEGIN; INSERT INTO mark VALUES (%d); UPDATE tv SET m = 7 WHERE id = 2000; UPDATE tv SET %s WHERE id = 2001; COMMIT`, id, set))
			run(name, fmt.Sprintf("update %s (no grouping: %v)", c.col, c.noGroup), c.noGroup, id, want, 2)
			h.expect("SELECT m::text FROM tv WHERE id = 2000", "1")
		}
	})
}

// dropApplier drops a stopped applier's slot and origin (the target has
// few origin slots), once their walsender and session have gone: both exit
// a moment after the applier.
func (h *harness) dropApplier(slot string) {
	h.t.Helper()
	h.waitSlotInactive(slot)
	h.source("SELECT pg_drop_replication_slot('" + slot + "')")
	conn, err := h.pair.Target.Connect(h.ctx, "postgres")
	if err != nil {
		h.t.Fatal(err)
	}
	defer conn.Close(h.ctx)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, err := conn.Exec(h.ctx, "SELECT pg_replication_origin_drop('walapply_"+slot+"')")
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("dropping the origin of %s: %v", slot, err)
		}
	}
}

// TestTypeErrorNumericAndBinary: the same for numeric precision, and for
// values sent in binary (--binary): a plain statement and a group's
// compacted one each name the column and the value's shape.
func TestTypeErrorNumericAndBinary(t *testing.T) {
	t.Parallel()
	forEachVersionAndFormat(t, func(t *testing.T, version int, binary bool) {
		h := newHarness(t, version, nil, nil)
		h.source(`CREATE TABLE tb (id int PRIMARY KEY, a varchar(20), b varchar(20), p numeric(10,2), q numeric(10,2))`,
			`CREATE PUBLICATION pub FOR TABLE tb`)
		h.target(`CREATE TABLE tb (id int PRIMARY KEY, a varchar(10), b varchar(10), p numeric(5,2), q numeric(5,2))`)
		// Binary values are described by their text form too.
		long, wide := "a value of 12 characters", "a number with 6 digits before the decimal point and 2 after"
		for n, c := range []struct {
			noGroup bool
			txns    []string
			want    string
		}{
			{true, []string{`INSERT INTO tb VALUES (1, 'ok', 'fine', 1, 2), (2, 'ok', 'twelve chars', 1, 2)`},
				`INSERT on "public"."tb": column "b" (character varying(10) on the target), ` + long + `: ERROR: value too long for type character varying(10) (SQLSTATE 22001)`},
			{false, []string{`INSERT INTO tb VALUES (10, 'ok', 'fine', 1, 2)`, `INSERT INTO tb VALUES (11, 'ok', 'fine', 1, 2), (12, 'ok', 'fine', 1, 123456.78)`,
				`INSERT INTO tb VALUES (13, 'ok', 'fine', 1, 2)`},
				`INSERT on "public"."tb": column "q" (numeric(5,2) on the target), ` + wide + `: ERROR: numeric field overflow (SQLSTATE 22003)`},
		} {
			slot := fmt.Sprintf("tb%d", n)
			h.createSlot(slot)
			h.source(c.txns...)
			cfg := h.config(slot, "pub")
			cfg.NoGroupCommit, cfg.Binary = c.noGroup, binary
			err := runUntilError(t, cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("want an error with\n%s\ngot %v", c.want, err)
			} else {
				t.Logf("%v", err)
			}
			h.expect("SELECT count(*)::text FROM tb", fmt.Sprint(n)) // the group's first transaction only
			h.dropApplier(slot)
		}
	})
}
