package initcopy

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// copyTypesSQL reads a table's copied columns' types. $1 is the table
// (quoted, qualified), $2 the column names.
const copyTypesSQL = `
SELECT a.attname::text,
       a.atttypid::bigint,
       pg_catalog.format_type(a.atttypid, a.atttypmod),
       tn.nspname::text || '.' || t.typname::text,
       t.typtype::text,
       t.typsend <> 0,
       t.typreceive <> 0,
       (tn.nspname = 'pg_catalog' AND t.typname::text ~ '^_?reg')
FROM pg_catalog.pg_attribute a
JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
JOIN pg_catalog.pg_namespace tn ON tn.oid = t.typnamespace
WHERE a.attrelid = $1::pg_catalog.regclass AND a.attnum > 0 AND NOT a.attisdropped
  AND a.attname = ANY ($2::text[])`

// copyColumnType is one column's type, as copyTypesSQL reads it.
type copyColumnType struct {
	oid           int64
	format, name  string
	kind          string // pg_type.typtype
	send, receive bool
	oidAlias      bool
}

func readCopyTypes(ctx context.Context, conn *pgx.Conn, t *Table) (map[string]copyColumnType, error) {
	rows, err := conn.Query(ctx, copyTypesSQL, t.String(), t.copyCols)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]copyColumnType{}
	for rows.Next() {
		var col string
		var ct copyColumnType
		if err := rows.Scan(&col, &ct.oid, &ct.format, &ct.name, &ct.kind, &ct.send, &ct.receive, &ct.oidAlias); err != nil {
			return nil, err
		}
		out[col] = ct
	}
	return out, rows.Err()
}

// binaryColumn reports whether one column can be copied in binary format
// from source type s into target type d. The initial copy's format is
// chosen per table (binaryCopy): binary when every copied column
// has exactly the same type on the source and the target and the type's
// binary form carries no database-local identifiers, text otherwise (or
// always, with Config.CopyFormat "text": Copier.Text). Binary is cheaper to produce and
// parse on both servers (no number or timestamp formatting), and unlike
// the streamed changes' --binary, which trusts the user's word that the
// types match, the copy checks it itself, column by column, so it needs no
// flag.
//
// A column qualifies when, on both sides:
//   - its type is one of PostgreSQL's own (pg_catalog, OID below 10000, the
//     same OID on both; arrays of them included: an array's binary form
//     names its element type's OID, so an array of a user type, whose OID
//     differs between the clusters, would be refused by the target), or an
//     enum of the same schema and name (its binary form is the label);
//   - format_type with the typmod is the same (numeric(12,3) is not
//     numeric);
//   - it is a base, range or multirange type or enum (not a composite: a
//     row's binary form names its columns' type OIDs), with a send function
//     on the source and a receive function on the target;
//   - it is not an OID alias (regclass and its kin): those are numbers in
//     binary, names in text, and only a name means the same object on the
//     target.
//
// Anything else is copied in text, as before: a domain, a composite, a
// type of an extension, int4 into int8, timestamp into timestamptz (whose
// binary forms are both int64 and would be read with another meaning).
func binaryColumn(s, d copyColumnType) bool {
	if s.format != d.format || s.name != d.name || s.kind != d.kind || !s.send || !d.receive {
		return false
	}
	switch s.kind {
	case "e":
		return true
	case "b", "r", "m":
		return s.oid == d.oid && s.oid < firstBootstrapOID && !s.oidAlias
	}
	return false
}

// firstBootstrapOID bounds the OIDs of PostgreSQL's own types, fixed in
// every cluster of a version and across versions (FirstGenbkiObjectId).
const firstBootstrapOID = 10000

// textColumns returns the copied columns that must go as text.
func textColumns(t *Table, src, tgt map[string]copyColumnType) []string {
	var out []string
	for _, c := range t.copyCols {
		s, ok1 := src[c]
		d, ok2 := tgt[c]
		if !ok1 || !ok2 || !binaryColumn(s, d) {
			out = append(out, c)
		}
	}
	return out
}

// binaryCopy decides whether table t is copied in binary format, reading
// the column types on the worker's two connections (the source's in its
// snapshot's transaction, the target's in the table's).
func (w *copyWorker) binaryCopy(ctx context.Context, t *Table) (bool, error) {
	if w.c.Text {
		return false, nil
	}
	src, err := readCopyTypes(ctx, w.src, t)
	if err != nil {
		return false, fmt.Errorf("copying table %s: reading its column types on the source: %w", t, err)
	}
	tgt, err := readCopyTypes(ctx, w.tgt, t)
	if err != nil {
		return false, fmt.Errorf("copying table %s: reading its column types on the target: %w", t, err)
	}
	text := textColumns(t, src, tgt)
	if len(text) > 0 {
		slices.Sort(text)
		w.c.Log.Debug().Str("relation", t.logName()).Str("text_columns", strings.Join(text, ",")).
			Msg("copying in text format: these columns' types differ between source and target or have no portable binary form")
	}
	return len(text) == 0, nil
}

func copyFormatName(binary bool) string {
	if binary {
		return "binary"
	}
	return "text"
}
