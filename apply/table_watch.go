package apply

import (
	"context"
	"fmt"
	"strings"

	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/protocol"
)

// notCopiedWarning is logged once for each table published later to an
// applier without --copy.
const notCopiedWarning = "newly published table: its changes are applied from here on, but its existing rows are not copied (the applier was not started with --copy); copy them yourself or start a new applier with --copy"

// newTablesError ends a session whose stream named a published table the
// applier has not copied: Run starts the next session at once, without
// backoff, and that session copies it (refreshTables).
type newTablesError struct{ tables []sqlgen.Rel }

func (e *newTablesError) Error() string {
	return "apply: the stream names newly published table(s) " + relNames(e.tables) + ": restarting the session to copy them"
}

func relNames(ns []sqlgen.Rel) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = sqlgen.QuoteQualified(n.Schema, n.Name)
	}
	return strings.Join(s, ", ")
}

// tableWatch checks the stream's Relation messages against the tables the
// applier knows.
type tableWatch struct {
	applier string
	// copying: the applier copies tables published later (its initial
	// copy finished); else it records and warns.
	copying bool
	known   map[sqlgen.Rel]bool
	syncs   syncs // tables being copied in the background (refresh_sync.go)
}

// check is called with every Relation message, before anything of the
// transaction it belongs to is applied to that table.
func (w *tableWatch) check(ctx context.Context, a *applier, rel *protocol.Relation) error {
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
		return w.begin(ctx, a, n) // refresh_sync.go
	}
	w.known[n] = true
	a.log.Warn().Str("relation", sqlgen.LogRelation(n.Schema, n.Name)).
		Msg(notCopiedWarning)
	if a.catalog == nil {
		return nil
	}
	if err := recordNotCopied(ctx, a.catalog, w.applier, []sqlgen.Rel{n}); err != nil {
		return fmt.Errorf("recording newly published table %s: %w", sqlgen.QuoteQualified(n.Schema, n.Name), err)
	}
	return nil
}
