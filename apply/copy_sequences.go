package apply

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/internal/secret"
)

// SequenceOptions says which sequences SyncSequences sets.
type SequenceOptions struct {
	Source, Target string // connection strings
	// Publications selects the sequences owned by columns (serial or
	// identity) of the tables these publications publish, or of the
	// partitioned tables those are partitions of.
	Publications []string
	// Schemas selects every sequence in these schemas. With neither
	// Publications nor Schemas, every sequence outside the system schemas
	// (and walapply's) is set.
	Schemas []string
}

// SequenceValue is a source sequence's state, as set on the target.
type SequenceValue struct {
	Schema, Name string
	LastValue    int64
	// IsCalled: nextval has returned LastValue already, so the next
	// value is the one after it (setval's third argument).
	IsCalled bool
}

// String names the sequence, quoted and schema-qualified.
func (v SequenceValue) String() string { return sqlgen.QuoteQualified(v.Schema, v.Name) }

// ErrSequencesMissing is wrapped by the error of SyncSequences when
// sequences of the source do not exist on the target.
var ErrSequencesMissing = errors.New("apply: sequences missing on the target")

const ownedSequencesSQL = `
SELECT DISTINCT sn.nspname::text, s.relname::text
FROM pg_catalog.pg_publication_tables p
JOIN pg_catalog.pg_namespace tn ON tn.nspname = p.schemaname
JOIN pg_catalog.pg_class t ON t.relnamespace = tn.oid AND t.relname = p.tablename
CROSS JOIN LATERAL (SELECT t.oid UNION SELECT relid FROM pg_catalog.pg_partition_ancestors(t.oid)) anc(relid)
JOIN pg_catalog.pg_depend d ON d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.refobjid = anc.relid
     AND d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.deptype IN ('a', 'i')
JOIN pg_catalog.pg_class s ON s.oid = d.objid AND s.relkind = 'S'
JOIN pg_catalog.pg_namespace sn ON sn.oid = s.relnamespace
WHERE p.pubname = ANY ($1)`

const schemaSequencesSQL = `
SELECT n.nspname::text, c.relname::text
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'S' AND n.nspname = ANY ($1)`

const allSequencesSQL = `
SELECT n.nspname::text, c.relname::text
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'S' AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'walapply')
  AND n.nspname NOT LIKE 'pg\_toast%' AND n.nspname NOT LIKE 'pg\_temp\_%'`

// SyncSequences sets the target's sequences to the source's current
// values (setval with is_called, so the target's next value is the one
// the source would have given out next) and returns what it set. It checks
// first that every selected sequence exists on the target, and sets none
// if any is missing.
//
// Logical replication does not carry sequences: the rows a replica
// receives hold the values the source's sequences gave out, but the
// replica's own sequences stay where they were. Before the application
// moves to the target (the cut-over), its sequences must be set from the
// source's, or the first inserts there collide with replicated rows.
// SyncSequences does that; run it after the writes on the source have
// stopped and the applier has caught up.
func SyncSequences(ctx context.Context, o SequenceOptions) ([]SequenceValue, error) {
	src, err := pgx.Connect(ctx, o.Source)
	if err != nil {
		return nil, fmt.Errorf("connecting to the source: %w", secret.Error(err, o.Source))
	}
	defer src.Close(context.WithoutCancel(ctx))
	seqs, err := selectSequences(ctx, src, o)
	if err != nil {
		return nil, err
	}
	for i := range seqs {
		// Read from the sequence itself: pg_sequences hides last_value
		// before the first nextval and from roles without USAGE.
		q := "SELECT last_value, is_called FROM " + seqs[i].String()
		if err := src.QueryRow(ctx, q).Scan(&seqs[i].LastValue, &seqs[i].IsCalled); err != nil {
			return nil, fmt.Errorf("reading sequence %s on the source: %w", seqs[i], err)
		}
	}

	tgt, err := pgx.Connect(ctx, o.Target)
	if err != nil {
		return nil, fmt.Errorf("connecting to the target: %w", secret.Error(err, o.Target))
	}
	defer tgt.Close(context.WithoutCancel(ctx))
	names := make([]string, len(seqs))
	for i, s := range seqs {
		names[i] = s.String()
	}
	var missing []string
	if err := tgt.QueryRow(ctx, `SELECT coalesce(array_agg(n ORDER BY n), '{}') FROM unnest($1::text[]) n
		WHERE pg_catalog.to_regclass(n) IS NULL
		   OR (SELECT relkind FROM pg_catalog.pg_class WHERE oid = pg_catalog.to_regclass(n)) <> 'S'`, names).Scan(&missing); err != nil {
		return nil, fmt.Errorf("looking up the sequences on the target: %w", err)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %s (create them, then run again; nothing was set)", ErrSequencesMissing, strings.Join(missing, ", "))
	}
	err = pgx.BeginFunc(ctx, tgt, func(tx pgx.Tx) error {
		for _, s := range seqs {
			if _, err := tx.Exec(ctx, "SELECT pg_catalog.setval($1::text::pg_catalog.regclass, $2, $3)", s.String(), s.LastValue, s.IsCalled); err != nil {
				return fmt.Errorf("setting sequence %s on the target to %d: %w", s, s.LastValue, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return seqs, nil
}

// selectSequences lists the sequences o selects, sorted.
func selectSequences(ctx context.Context, src *pgx.Conn, o SequenceOptions) ([]SequenceValue, error) {
	type query struct {
		sql string
		arg []string
	}
	var qs []query
	if len(o.Publications) > 0 {
		var missing []string
		if err := src.QueryRow(ctx, `SELECT coalesce(array_agg(p ORDER BY p), '{}') FROM unnest($1::text[]) p
			WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_publication WHERE pubname = p)`, o.Publications).Scan(&missing); err != nil {
			return nil, fmt.Errorf("looking up the publications on the source: %w", err)
		}
		if len(missing) > 0 {
			return nil, fmt.Errorf("publication(s) %s do not exist on the source", strings.Join(missing, ", "))
		}
		qs = append(qs, query{ownedSequencesSQL, o.Publications})
	}
	if len(o.Schemas) > 0 {
		qs = append(qs, query{schemaSequencesSQL, o.Schemas})
	}
	if len(qs) == 0 {
		qs = append(qs, query{allSequencesSQL, nil})
	}
	seen := map[sqlgen.Rel]bool{}
	var out []SequenceValue
	for _, q := range qs {
		var args []any
		if q.arg != nil {
			args = append(args, q.arg)
		}
		rows, err := src.Query(ctx, q.sql, args...)
		if err != nil {
			return nil, fmt.Errorf("listing the sequences on the source: %w", err)
		}
		for rows.Next() {
			var n sqlgen.Rel
			if err := rows.Scan(&n.Schema, &n.Name); err != nil {
				rows.Close()
				return nil, fmt.Errorf("listing the sequences on the source: %w", err)
			}
			if !seen[n] {
				seen[n] = true
				out = append(out, SequenceValue{Schema: n.Schema, Name: n.Name})
			}
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("listing the sequences on the source: %w", err)
		}
	}
	sortSequences(out)
	return out, nil
}

func sortSequences(s []SequenceValue) {
	slices.SortFunc(s, func(a, b SequenceValue) int {
		return cmp.Or(cmp.Compare(a.Schema, b.Schema), cmp.Compare(a.Name, b.Name))
	})
}
