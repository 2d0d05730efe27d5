package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
)

// NotCopiedWarning is logged once for each table published later to an
// applier without --copy.
const NotCopiedWarning = "newly published table: its changes are applied from here on, but its existing rows are not copied (the applier was not started with --copy); copy them yourself or start a new applier with --copy"

// NewTablesError ends a session whose stream named a published table the
// applier has not copied: Run starts the next session at once, without
// backoff, and that session copies it (refreshTables).
type NewTablesError struct{ Tables []sqlgen.Rel }

func (e *NewTablesError) Error() string {
	return "apply: the stream names newly published table(s) " + relNames(e.Tables) + ": restarting the session to copy them"
}

func relNames(ns []sqlgen.Rel) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = sqlgen.QuoteQualified(n.Schema, n.Name)
	}
	return strings.Join(s, ", ")
}

// TableWatch checks the stream's Relation messages against the tables the
// applier knows.
type TableWatch struct {
	applier string
	// copying: the applier copies tables published later (its initial
	// copy finished); else it records and warns.
	copying bool
	known   map[sqlgen.Rel]bool
	syncs   syncs // tables being copied in the background (table_sync.go)
	// record records tables found in the stream, not copied, in
	// walapply.tables (the session's recordNotCopied); nil in tests.
	record func(ctx context.Context, q state.Querier, applier string, tables []sqlgen.Rel) error
}

// NewTableWatch watches the stream for tables the applier called applier
// does not know (none yet: Know adds them). copying: it copies them (its
// initial copy finished); else it records them with record and warns.
func NewTableWatch(applier string, copying bool, record func(ctx context.Context, q state.Querier, applier string, tables []sqlgen.Rel) error) *TableWatch {
	return &TableWatch{applier: applier, copying: copying, known: map[sqlgen.Rel]bool{}, record: record}
}

// Know adds n to the tables the applier knows.
func (w *TableWatch) Know(n sqlgen.Rel) { w.known[n] = true }

// SetStart gives w the session's way to begin a table's background copy
// (session.startSync).
func (w *TableWatch) SetStart(start func(ctx context.Context, n sqlgen.Rel) (*TableSync, error)) {
	w.syncs.start = start
}

// check is called with every Relation message, before anything of the
// transaction it belongs to is applied to that table.
func (w *TableWatch) check(ctx context.Context, a *Applier, rel *protocol.Relation) error {
	if w == nil {
		return nil
	}
	if err := w.relationChanged(a, rel); err != nil {
		return err
	}
	n := sqlgen.Rel{Schema: relmap.SourceSchema(rel.Namespace), Name: rel.Name}
	if w.known[n] {
		return nil
	}
	if w.copying {
		return w.begin(ctx, a, n) // table_sync.go
	}
	w.known[n] = true
	a.log.Warn().Str("relation", sqlgen.LogRelation(n.Schema, n.Name)).
		Msg(NotCopiedWarning)
	if a.catalog == nil || w.record == nil {
		return nil
	}
	if err := w.record(ctx, a.catalog, w.applier, []sqlgen.Rel{n}); err != nil {
		return fmt.Errorf("recording newly published table %s: %w", sqlgen.QuoteQualified(n.Schema, n.Name), err)
	}
	return nil
}
