package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/testenv"
)

// ErrMismatch reports that source and target differ after a drain.
var ErrMismatch = errors.New("bench: source and target differ")

// Verification is what a source/target comparison covered.
type Verification struct {
	Tables int   // tables compared
	Rows   int64 // rows compared (source side), all identical
}

// maxReported bounds the differences one table's error lists.
const maxReported = 5

// verify compares every ordinary table of schema public row by row: both
// sides stream (primary key, md5 of the row's text) in primary-key order
// and the streams must be equal. Row text covers every column, and TOAST
// values are hashed on the server, so little crosses the wire.
func verify(ctx context.Context, source, target *testenv.Cluster, db string) (Verification, error) {
	var v Verification
	src, err := source.Connect(ctx, db)
	if err != nil {
		return v, err
	}
	defer src.Close(context.Background())
	tgt, err := target.Connect(ctx, db)
	if err != nil {
		return v, err
	}
	defer tgt.Close(context.Background())

	srcTables, err := publicTables(ctx, src)
	if err != nil {
		return v, fmt.Errorf("listing the source's tables: %w", err)
	}
	tgtTables, err := publicTables(ctx, tgt)
	if err != nil {
		return v, fmt.Errorf("listing the target's tables: %w", err)
	}
	if !slices.Equal(srcTables, tgtTables) {
		return v, fmt.Errorf("%w: tables of schema public: source %v, target %v", ErrMismatch, srcTables, tgtTables)
	}
	var errs []error
	for _, table := range srcTables {
		n, err := compareTable(ctx, src, tgt, table)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		v.Tables++
		v.Rows += n
	}
	return v, errors.Join(errs...)
}

// publicTables lists the ordinary tables of schema public, sorted.
func publicTables(ctx context.Context, conn *pgx.Conn) ([]string, error) {
	rows, err := conn.Query(ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') ORDER BY c.relname COLLATE "C"`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// rowQuery returns the query that lists a table's rows as (key text, row
// md5) in key order: primary-key order, or the whole row's text for a table
// without one.
func rowQuery(ctx context.Context, conn *pgx.Conn, table string) (string, error) {
	var keys []string
	rows, err := conn.Query(ctx, `SELECT a.attname FROM pg_index i
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
WHERE i.indrelid = $1::regclass AND i.indisprimary
ORDER BY array_position(i.indkey::int2[], a.attnum)`, pgx.Identifier{"public", table}.Sanitize())
	if err != nil {
		return "", err
	}
	if keys, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return "", err
	}
	t := pgx.Identifier{"public", table}.Sanitize()
	if len(keys) == 0 {
		return fmt.Sprintf(`SELECT t::text, md5(t::text) FROM %s t ORDER BY t::text COLLATE "C"`, t), nil
	}
	quoted := make([]string, len(keys))
	for i, k := range keys {
		quoted[i] = "t." + pgx.Identifier{k}.Sanitize()
	}
	key := strings.Join(quoted, ", ")
	return fmt.Sprintf(`SELECT ROW(%s)::text, md5(t::text) FROM %s t ORDER BY %s`, key, t, key), nil
}

// compareTable streams one table from both sides in lockstep and returns
// the number of rows, or an error listing the first differences. While the
// keys agree the comparison is positional; from the first disagreement on
// (a row missing on one side) the rest of both sides is collected by key,
// so that each difference is named exactly.
func compareTable(ctx context.Context, src, tgt *pgx.Conn, table string) (int64, error) {
	q, err := rowQuery(ctx, src, table)
	if err != nil {
		return 0, fmt.Errorf("finding the key of table %s: %w", table, err)
	}
	srcRows, err := src.Query(ctx, q)
	if err != nil {
		return 0, fmt.Errorf("reading table %s on the source: %w", table, err)
	}
	defer srcRows.Close()
	tgtRows, err := tgt.Query(ctx, q)
	if err != nil {
		return 0, fmt.Errorf("reading table %s on the target: %w", table, err)
	}
	defer tgtRows.Close()

	var (
		n, nt      int64
		diffs      []string
		srcRest    map[string]string // key → md5, after the keys diverged
		tgtRest    map[string]string
		sKey, sSum string
		tKey, tSum string
		sOK, tOK   = true, true
	)
	for sOK || tOK {
		if sOK = sOK && srcRows.Next(); sOK {
			n++
			if err := srcRows.Scan(&sKey, &sSum); err != nil {
				return 0, fmt.Errorf("reading table %s on the source: %w", table, err)
			}
		}
		if tOK = tOK && tgtRows.Next(); tOK {
			nt++
			if err := tgtRows.Scan(&tKey, &tSum); err != nil {
				return 0, fmt.Errorf("reading table %s on the target: %w", table, err)
			}
		}
		if srcRest == nil && sOK && tOK && sKey == tKey {
			if sSum != tSum {
				diffs = append(diffs, fmt.Sprintf("row %s differs", sKey))
			}
			continue
		}
		if srcRest == nil {
			srcRest, tgtRest = map[string]string{}, map[string]string{}
		}
		if sOK {
			srcRest[sKey] = sSum
		}
		if tOK {
			tgtRest[tKey] = tSum
		}
	}
	if err := srcRows.Err(); err != nil {
		return 0, fmt.Errorf("reading table %s on the source: %w", table, err)
	}
	if err := tgtRows.Err(); err != nil {
		return 0, fmt.Errorf("reading table %s on the target: %w", table, err)
	}
	diffs = append(diffs, restDiffs(srcRest, tgtRest)...)
	if n != nt && len(diffs) == 0 {
		// Only duplicates of a keyless table can collapse in the maps.
		diffs = append(diffs, "duplicate rows differ in number")
	}
	if len(diffs) > 0 {
		return 0, fmt.Errorf("%w: table %s: %d rows on the source, %d on the target, %d differences, first: %s",
			ErrMismatch, table, n, nt, len(diffs), strings.Join(diffs[:min(len(diffs), maxReported)], "; "))
	}
	return n, nil
}

// restDiffs names the differences between two key → md5 maps, sorted.
func restDiffs(src, tgt map[string]string) []string {
	var out []string
	for k, s := range src {
		switch t, ok := tgt[k]; {
		case !ok:
			out = append(out, fmt.Sprintf("row %s only on the source", k))
		case s != t:
			out = append(out, fmt.Sprintf("row %s differs", k))
		}
	}
	for k := range tgt {
		if _, ok := src[k]; !ok {
			out = append(out, fmt.Sprintf("row %s only on the target", k))
		}
	}
	slices.Sort(out)
	return out
}
