package apply

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/apply/internal/sqlgen"
)

// listDifferingKeys lists up to limit primary keys whose rows differ
// between src and dst (both in their side's snapshot): each side streams
// (key text, the row's digest: rowDigest) ordered by the key text in the "C"
// collation, which is Go's byte order, and the two streams are merged.
// A table without a primary key or replica identity index gets a reason
// instead.
func listDifferingKeys(ctx context.Context, src, dst *pgx.Conn, t comparedTable, dstPartitioned bool, digest string, limit int, out *TableComparison) error {
	if len(t.key) == 0 {
		out.Reason = "no primary key (nor replica identity index) on the source: differing keys not listed"
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops both queries once enough keys are found
	query := func(conn *pgx.Conn, partitioned bool, filter string) (pgx.Rows, error) {
		rows, err := conn.Query(ctx, "SELECT "+keyText(t.key)+` COLLATE "C", (`+digest+")::text"+
			fromClause(t, partitioned, filter)+" ORDER BY 1", pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			return nil, fmt.Errorf("reading the keys of table %s: %w", sqlgen.QuoteQualified(t.schema, t.name), err)
		}
		return rows, nil
	}
	srcRows, err := query(src, t.partitioned, t.filter)
	if err != nil {
		return err
	}
	defer srcRows.Close()
	// A partitioned target table is read with its partitions.
	dstRows, err := query(dst, dstPartitioned, "")
	if err != nil {
		return err
	}
	defer dstRows.Close()
	s, d := keyStream{rows: srcRows}, keyStream{rows: dstRows}
	if err := s.next(); err != nil {
		return err
	}
	if err := d.next(); err != nil {
		return err
	}
	add := func(key, kind string) { out.Keys = append(out.Keys, KeyDifference{Key: key, Kind: kind}) }
	for (!s.done || !d.done) && len(out.Keys) < limit {
		var err error
		switch {
		case d.done || !s.done && s.key < d.key:
			add(s.key, "missing")
			err = s.next()
		case s.done || d.key < s.key:
			add(d.key, "extra")
			err = d.next()
		default:
			if s.hash != d.hash {
				add(s.key, "changed")
			}
			if err = s.next(); err == nil {
				err = d.next()
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// keyStream is one side's (key, hash) rows.
type keyStream struct {
	rows      pgx.Rows
	key, hash string
	done      bool
}

func (k *keyStream) next() error {
	if k.done {
		return nil
	}
	if !k.rows.Next() {
		k.done = true
		return k.rows.Err()
	}
	return k.rows.Scan(&k.key, &k.hash)
}

// keyText is the text form of a key: the column's own for one column, the
// record's for several.
func keyText(key []string) string {
	if len(key) == 1 {
		return "(" + sqlgen.QuoteIdent(key[0]) + ")::text"
	}
	return "ROW(" + sqlgen.QuoteList(key) + ")::text"
}
