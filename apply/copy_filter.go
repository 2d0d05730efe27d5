package apply

import (
	"context"
	"fmt"

	"github.com/walapply/walapply/apply/internal/engine"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/protocol"
)

// loadCopyFilter reads the tables an initial copy of applier copied in a
// snapshot later than from, the position streaming starts at. It returns
// nil when there are none (always, unless a copy was resumed).
func loadCopyFilter(ctx context.Context, q relmap.Querier, applier string, from protocol.LSN) (*engine.CopyFilter, error) {
	rows, err := q.Query(ctx, `SELECT schema_name, table_name, copy_lsn::text, snapshot FROM walapply.copy_state
		WHERE applier = $1 AND status = 'done' AND copy_lsn > $2::pg_catalog.pg_lsn`, applier, from.String())
	if err != nil {
		return nil, fmt.Errorf("reading walapply.copy_state on the target: %w", err)
	}
	defer rows.Close()
	f := engine.NewCopyFilter()
	for rows.Next() {
		var n sqlgen.Rel
		var lsn, snap string
		if err := rows.Scan(&n.Schema, &n.Name, &lsn, &snap); err != nil {
			return nil, fmt.Errorf("reading walapply.copy_state on the target: %w", err)
		}
		t := &engine.CopiedTable{}
		if t.LSN, err = protocol.ParseLSN(lsn); err != nil {
			return nil, fmt.Errorf("walapply.copy_state, table %s: %w", sqlgen.QuoteQualified(n.Schema, n.Name), err)
		}
		if t.Snap, err = engine.ParseSnapshot(snap); err != nil {
			return nil, fmt.Errorf("walapply.copy_state, table %s: %w", sqlgen.QuoteQualified(n.Schema, n.Name), err)
		}
		f.Add(n, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading walapply.copy_state on the target: %w", err)
	}
	if f.Len() == 0 {
		return nil, nil
	}
	return f, nil
}
