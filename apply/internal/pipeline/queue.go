package pipeline

import (
	"context"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/protocol"
)

// StmtQueue is the bookkeeping a target keeps of its queue, shared by its
// implementations: what each queued statement was for, the keys rendered
// for messages, the source transaction being queued, and the commits that
// drained batches confirmed.
type StmtQueue struct {
	Queued []Stmt
	Keys   []byte // rendered keys of queued UPDATE/DELETE statements

	// TxnXid and TxnLSN name the source transaction whose statements are
	// being queued, for messages about them.
	TxnXid   uint32
	TxnLSN   protocol.LSN
	FirstLSN protocol.LSN // of the target transaction's first source transaction

	Done []CommitMark // commits confirmed by drain, for the applier

	// XactSetup is the prepared origin advance (state.XactSetupSQL).
	XactSetup *pgconn.StatementDescription

	// Missing is called for an UPDATE or DELETE that found no row.
	Missing func(q *Stmt, n int, key string)
	// Conflicted is called for each key a self-recording statement
	// returns (see Stmt.Conflict).
	Conflicted func(q *Stmt, key string)
}

// Last returns the statement queued last.
func (s *StmtQueue) Last() *Stmt { return &s.Queued[len(s.Queued)-1] }

// QueryCatalog looks tables up with q's queries, e.g. on the applying
// connection.
type QueryCatalog struct{ Q relmap.Querier }

func (c QueryCatalog) LookupTable(ctx context.Context, schema, name string) (*relmap.Table, bool, error) {
	return relmap.LookupTable(ctx, c.Q, schema, name)
}
