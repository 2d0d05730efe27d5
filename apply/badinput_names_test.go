package apply_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/testenv"
)

// Hostile names: quotes, backslashes, spaces, dots, upper case, non-ASCII,
// SQL keywords and comment and statement separators, in every kind of name
// walapply handles. Each must reach the target as a name, never as SQL.
const (
	hostileSchema = `Sch"ema.'x'\ ü;--`
	hostileTable  = `Select "from" t.b\l'e ✓`
	hostileFull   = `FULL tâble "identity"`
	hostileType   = `My "Mood".ë`
	hostilePub    = `pub "p" ü,x`
	hostileName   = `o'brien "x" \ y`
)

var (
	// The key column and the other columns of hostileTable.
	hostileKey  = `Key Col"`
	hostileCols = []string{`"quoted"`, `back\slash`, `Upper Case`, `naïve ✓`, `select`, `from`, `a.b`, `semi;colon --`, `$1`, `'single'`}
	// Labels of hostileType.
	hostileLabels = []string{`it's`, `back\slash`, `"dq"`, `ümlaut ☺`, `with space`, `select`, `a,b`, `(x)`, `NULL`}
	// Values: text that looks like SQL, like its own quoting, like a
	// parameter.
	hostileValues = []string{`'); DROP TABLE t; --`, `\x00\\`, `$1`, `"`, `O'Reilly`, `NULL`, ``, `ü✓`}
)

// TestHostileNames: tables, schemas, columns, an enum type and its labels,
// the publication and the applier's name all hold characters that would
// break SQL built by pasting; inserts, updates (key changes included),
// deletes and a truncate all replicate, and source and target match.
func TestHostileNames(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		tbl := secQualified(hostileSchema, hostileTable)
		full := secQualified(hostileSchema, hostileFull)
		typ := secQualified(hostileSchema, hostileType)
		labels := make([]string, len(hostileLabels))
		for i, l := range hostileLabels {
			labels[i] = secLiteral(l)
		}
		cols := make([]string, len(hostileCols))
		for i, c := range hostileCols {
			cols[i] = secIdent(c) + " text"
		}
		h.both(
			`CREATE SCHEMA `+secIdent(hostileSchema),
			`CREATE TYPE `+typ+` AS ENUM (`+strings.Join(labels, ", ")+`)`,
			fmt.Sprintf(`CREATE TABLE %s (%s int PRIMARY KEY, mood %s, %s)`, tbl, secIdent(hostileKey), typ, strings.Join(cols, ", ")),
			// REPLICA IDENTITY FULL: rows are located by every column,
			// an enum and json (compared as text) among them.
			fmt.Sprintf(`CREATE TABLE %s (%s %s, %s json, %s text)`, full, secIdent(`Mood "m"`), typ, secIdent(`js.on`), secIdent(`WHERE`)),
			`ALTER TABLE `+full+` REPLICA IDENTITY FULL`)
		h.source(`CREATE PUBLICATION ` + secIdent(hostilePub) + ` FOR TABLE ` + tbl + `, ` + full)
		h.createSlot("hostile")

		// Rows: every label, every value in every column.
		var stmts []string
		for i, l := range hostileLabels {
			vals := make([]string, len(hostileCols))
			for j := range hostileCols {
				vals[j] = secLiteral(hostileValues[(i+j)%len(hostileValues)])
			}
			stmts = append(stmts,
				fmt.Sprintf(`INSERT INTO %s VALUES (%d, %s, %s)`, tbl, i, secLiteral(l), strings.Join(vals, ", ")),
				fmt.Sprintf(`INSERT INTO %s VALUES (%s, %s, %s)`, full, secLiteral(l), secLiteral(fmt.Sprintf(`{"k": %q}`, l)), secLiteral(hostileValues[i%len(hostileValues)])))
		}
		// A duplicate row under FULL identity: one copy is changed.
		stmts = append(stmts, fmt.Sprintf(`INSERT INTO %s SELECT * FROM %s WHERE %s = %s`, full, full, secIdent(`Mood "m"`), secLiteral(hostileLabels[0])))
		h.source(stmts...)
		cfg := h.secConfig("hostile", hostilePub, nil)
		cfg.Name = hostileName
		stop := h.runApplier(cfg)
		h.source(
			fmt.Sprintf(`UPDATE %s SET %s = %s, mood = %s WHERE %s = 1`, tbl, secIdent(hostileCols[3]), secLiteral(`'; SELECT 1; --`), secLiteral(hostileLabels[0]), secIdent(hostileKey)),
			fmt.Sprintf(`UPDATE %s SET %s = 100 WHERE %s = 2`, tbl, secIdent(hostileKey), secIdent(hostileKey)),
			fmt.Sprintf(`DELETE FROM %s WHERE %s = 3`, tbl, secIdent(hostileKey)),
			fmt.Sprintf(`UPDATE %s SET %s = 'changed' WHERE ctid = (SELECT min(ctid) FROM %s WHERE %s = %s)`, full, secIdent(`WHERE`), full, secIdent(`Mood "m"`), secLiteral(hostileLabels[0])),
			fmt.Sprintf(`DELETE FROM %s WHERE %s = %s`, full, secIdent(`Mood "m"`), secLiteral(hostileLabels[1])),
		)
		h.waitCaughtUp("hostile", time.Minute)
		rowsTbl := fmt.Sprintf(`SELECT (x.*)::text FROM %s x`, tbl)
		rowsFull := fmt.Sprintf(`SELECT (x.*)::text FROM %s x`, full)
		if n := h.compare(rowsTbl); n != len(hostileLabels)-1 {
			t.Errorf("%d rows in %s, want %d", n, tbl, len(hostileLabels)-1)
		}
		if n := h.compare(rowsFull); n != len(hostileLabels) {
			t.Errorf("%d rows in %s, want %d", n, full, len(hostileLabels))
		}
		h.source(`TRUNCATE ` + tbl)
		h.waitCaughtUp("hostile", time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		h.expect(fmt.Sprintf(`SELECT count(*)::text FROM %s`, tbl), "0")
		h.compare(rowsFull)
		// The applier's name made its origin and its registry row.
		h.expect(`SELECT roname FROM pg_replication_origin`, "walapply_"+hostileName)
		h.expect(`SELECT name || ' ' || publications::text FROM walapply.appliers`, hostileName+` {"`+strings.ReplaceAll(hostilePub, `"`, `\"`)+`"}`)
	})
}
