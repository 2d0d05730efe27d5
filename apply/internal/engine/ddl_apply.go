package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/apply/internal/initcopy"
	"github.com/walapply/walapply/apply/internal/pipeline"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/internal/ddl"
	"github.com/walapply/walapply/protocol"
)

// OpDDL names a captured DDL statement in errors (TxnError.Op).
const OpDDL = "DDL"

// DDLState is what --ddl needs while applying (Config.DDL): the source
// captures each DDL statement as a transactional logical message
// (internal/ddl), and the applier executes it at its place in the
// transaction, in the same target transaction as the changes around it,
// so it is applied exactly once by the same origin rule as data.
//
// At a statement the applier writes out the compaction's net state and
// flushes the batch (everything before it is executed first, in order),
// runs the statement with the source's search_path (SET LOCAL) and the
// applier's own role (the source's role is only logged: the target's roles
// need not match, and no SET ROLE means no role to trust the source with),
// then forgets every relation's target mapping and prepared statements:
// the source sends a new Relation message before the next change of a
// changed table, and the target's columns are read again, on the applying
// connection until the transaction commits (the catalog connection cannot
// see the uncommitted DDL). Group commit goes on across the statement: it
// is all one target transaction, written out in order.
//
// Only statements that touch a published table are applied: a table the
// session knows (TableWatch), one created by an applied statement, or a
// table created under a FOR ALL TABLES or FOR TABLES IN SCHEMA publication
// that includes it. Everything else is logged and skipped. A created
// table is recorded 'existing' in walapply.copy_state in the same
// transaction: every row it has comes through the stream, nothing to copy.
type DDLState struct {
	allTables bool                // a publication is FOR ALL TABLES
	schemas   map[string]bool     // schemas of FOR TABLES IN SCHEMA publications
	created   map[sqlgen.Rel]bool // tables named by applied statements (created, renamed)
	oids      map[uint32]bool     // publishedOID's answers
	// dropped are the sql_drop messages of the statement being captured,
	// which come before its ddl_command_end one.
	dropped    []*ddl.Message
	droppedXid uint32
	// dial reaches the source (verifyDDL, publishedOID); publications
	// are the applier's.
	dial         Dialer
	publications []string
	queries      map[string]*DDLString
	src          *pgx.Conn // sourceConn's
	// uncommitted: a statement ran in the open target transaction, which
	// had not committed at commits (Stats.Commits).
	uncommitted bool
	commits     int64
	applied     int64 // statements applied this session
}

// NewDDLState is --ddl's state for a session of the applier with
// publications: allTables says one is FOR ALL TABLES, schemas are those of
// the FOR TABLES IN SCHEMA ones; dial reaches the source.
func NewDDLState(dial Dialer, publications []string, allTables bool, schemas map[string]bool) *DDLState {
	return &DDLState{allTables: allTables, schemas: schemas, created: map[sqlgen.Rel]bool{}, oids: map[uint32]bool{},
		dial: dial, publications: publications, queries: map[string]*DDLString{}}
}

// errSelectInto: SELECT INTO creates a published table from a query that
// cannot be told to leave it empty on the target.
var errSelectInto = errors.New("SELECT INTO cannot be replayed without its rows twice (the stream brings them); use CREATE TABLE ... AS on the source")

// DDLError is a captured DDL statement that failed on the target (or
// could not be replayed), with the source LSN of its message.
type DDLError struct {
	Statement string
	LSN       protocol.LSN
	Err       error
}

func (e *DDLError) Error() string {
	return fmt.Sprintf("captured DDL statement %q (its message ends at source LSN %s): %v; make the target able to run it, or apply this transaction on the target yourself (the statement and its changes) and restart with --skip-lsn at its commit LSN", e.Statement, e.LSN, e.Err)
}

func (e *DDLError) Unwrap() error { return e.Err }

// ddlUncommitted reports whether the open target transaction holds a DDL
// statement: catalog lookups must then use the applying connection.
func (a *Applier) ddlUncommitted() bool {
	return a.ddl != nil && a.ddl.uncommitted && a.Stats.Commits.Load() == a.ddl.commits
}

// ddlMessage handles a transactional logical message of the transaction
// being applied (also one replayed from a streamed transaction's spill
// file): a captured DDL statement is applied, other messages are ignored.
func (a *Applier) ddlMessage(ctx context.Context, m *protocol.LogicalMessage) error {
	d := a.ddl
	if d == nil || m.Prefix != ddl.Prefix || a.txn.skip || a.txn.userSkip {
		return nil
	}
	msg, err := ddl.Parse(m.Content)
	if err != nil {
		return a.fail(ctx, &PermanentError{Err: fmt.Errorf("at source LSN %s: %w", m.LSN, err)})
	}
	if msg.Kind == "drop" {
		if d.droppedXid != a.txn.xid {
			d.dropped = d.dropped[:0]
		}
		d.dropped, d.droppedXid = append(d.dropped, msg), a.txn.xid
		return nil
	}
	drops := d.dropped
	if d.droppedXid != a.txn.xid {
		drops = nil // (a statement's drop and command messages share its transaction)
	}
	d.dropped = nil
	if msg.Seq > 0 {
		if err := a.countEvent(ctx, msg); err != nil {
			return a.fail(ctx, err)
		}
	}
	if msg.Mark {
		return nil // counted only (temporary objects, or nothing done)
	}
	for _, o := range msg.Objects {
		if o.Tag == "GRANT" || o.Tag == "REVOKE" {
			a.log.Info().Str("statement", msg.Query).Stringer("lsn", m.LSN).Msg("captured GRANT or REVOKE: privileges are not replayed (roles are not replicated): skipped")
			return nil
		}
	}
	logged := a.log.With().Str("statement", msg.Query).Stringer("lsn", m.LSN).Uint32("xid", a.txn.xid).Logger()
	tables, created, err := a.ddlTables(ctx, msg, drops)
	if err == nil && len(tables) > 0 {
		// Signed by the capture? Asked only of what would run.
		var ok bool
		if ok, drops, err = a.verifyDDL(ctx, msg, drops); err == nil && !ok {
			logged.Warn().Msg("a walapply.ddl message that the source's DDL capture did not sign in this transaction (emitted by some role with pg_logical_emit_message): skipped")
			return nil
		}
		if err == nil {
			tables, created, err = a.ddlTables(ctx, msg, drops)
		}
	}
	if de := (*DDLError)(nil); errors.As(err, &de) && len(tables) > 0 {
		de.LSN = m.LSN // (checkCount's)
		return a.fail(ctx, &TxnError{Xid: a.txn.xid, CommitLSN: a.txn.finalLSN, Op: OpDDL, Relation: sqlgen.QuoteQualified(tables[0].Schema, tables[0].Name), Err: &PermanentError{Err: de}})
	}
	if err != nil {
		return a.fail(ctx, err)
	}
	if len(tables) == 0 {
		logged.Info().Msg("captured DDL touches no published table: skipped")
		return nil
	}
	te := &TxnError{Xid: a.txn.xid, CommitLSN: a.txn.finalLSN, Op: OpDDL, Relation: sqlgen.QuoteQualified(tables[0].Schema, tables[0].Name)}
	stmt, err := msg.Statement()
	if err != nil {
		te.Err = &PermanentError{Err: &DDLError{Statement: msg.Query, LSN: m.LSN, Err: err}}
		return a.fail(ctx, te)
	}
	stmt = ddl.InTransaction(stmt)
	for _, o := range msg.Objects {
		switch o.Tag {
		case "CREATE TABLE AS":
			stmt = ddl.WithNoData(stmt) // its rows come through the stream
		case "SELECT INTO":
			te.Err = &PermanentError{Err: &DDLError{Statement: msg.Query, LSN: m.LSN, Err: errSelectInto}}
			return a.fail(ctx, te)
		}
	}
	if err := a.writeOut(ctx); err != nil {
		return a.fail(ctx, err)
	}
	if failed, err := a.sess.Flush(ctx); err != nil {
		return a.failStmt(ctx, failed, err)
	}
	a.collect()
	if err := a.execDDL(ctx, msg.SearchPath, stmt, created); err != nil {
		te.Err = &DDLError{Statement: stmt, LSN: m.LSN, Err: err}
		return a.fail(ctx, te)
	}
	a.forgetRelations(ctx)
	for _, n := range created {
		d.created[n] = true
		if a.watch != nil {
			a.watch.known[n] = true
		}
	}
	d.uncommitted, d.commits = true, a.Stats.Commits.Load()
	d.applied++
	logged.Info().Str("role", msg.Role).Str("search_path", msg.SearchPath).Msg("applied captured DDL")
	return nil
}

// execDDL runs one statement in the open target transaction with the
// source's search_path, then the session's own again; tables created by
// it are recorded in walapply.copy_state.
func (a *Applier) execDDL(ctx context.Context, path, stmt string, created []sqlgen.Rel) error {
	if err := a.sess.Exec(ctx, "SELECT pg_catalog.set_config('search_path', "+escapedLiteral(path)+", true)"); err != nil {
		return fmt.Errorf("setting the source's search_path %q: %w", path, err)
	}
	if err := a.sess.Exec(ctx, stmt); err != nil {
		return err
	}
	if err := a.sess.Exec(ctx, "SELECT pg_catalog.set_config('search_path', 'pg_catalog', true)"); err != nil {
		return err
	}
	if len(created) > 0 && a.name != "" {
		// As insertTables (refresh_state.go) does, on the applying
		// connection (the target interface runs plain SQL only).
		var rows []string
		for _, n := range created {
			rows = append(rows, "("+escapedLiteral(a.name)+", "+escapedLiteral(n.Schema)+", "+escapedLiteral(n.Name)+", '"+initcopy.StatusExisting+"', true)")
		}
		if err := a.sess.Exec(ctx, "INSERT INTO walapply.copy_state (applier, schema_name, table_name, status, published) VALUES "+
			strings.Join(rows, ", ")+" ON CONFLICT DO NOTHING"); err != nil {
			return fmt.Errorf("recording the created table(s) in walapply.copy_state: %w", err)
		}
	}
	return nil
}

// escapedLiteral quotes s as an E” string literal, which reads the same
// whatever standard_conforming_strings is.
func escapedLiteral(s string) string {
	return "E'" + strings.NewReplacer(`\`, `\\`, "'", "''").Replace(s) + "'"
}

// ddlTables returns the published tables a statement's objects touch, and
// of them those it creates.
func (a *Applier) ddlTables(ctx context.Context, msg *ddl.Message, drops []*ddl.Message) (tables, created []sqlgen.Rel, err error) {
	d := a.ddl
	objs := msg.Objects
	for _, m := range drops {
		objs = append(objs, m.Objects...)
	}
	seen := map[sqlgen.Rel]bool{}
	for _, o := range objs {
		if o.Temp || strings.HasPrefix(o.Schema, "pg_temp") || len(o.Table) > 0 && strings.HasPrefix(o.Table[0], "pg_temp") {
			continue // (the capture leaves temporary objects out)
		}
		t, ok := o.Tables()
		if !ok && o.Type == "index" && len(o.Names) == 2 {
			// Dropped on its own: its table is gone from the source's
			// catalog, so ask the target's, which has the same index.
			if t, ok, err = a.indexTable(ctx, o.Names[0], o.Names[1]); err != nil {
				return nil, nil, err
			}
		}
		if !ok {
			continue
		}
		n := sqlgen.Rel{Schema: t.Schema, Name: t.Name}
		if seen[n] {
			continue
		}
		isNew := o.IsTable() && o.Tag == "CREATE TABLE" || o.Tag == "CREATE TABLE AS" || o.Tag == "SELECT INTO"
		published := d.created[n] || (a.watch != nil && a.watch.known[n])
		_, partition := o.Parent()
		if !published && isNew && (d.allTables || d.schemas[n.Schema]) {
			published = true
			created = append(created, n)
		}
		if oid := o.TableOID(); !published && (!isNew || partition) && oid != 0 {
			// A name the session does not know, of a table that existed
			// before (renamed or moved to another schema, by this
			// statement or earlier), or a new partition of a published
			// partitioned table (whose publication lists its leaves, or
			// its root). Published by its OID?
			if published, err = a.publishedOID(ctx, oid); err != nil {
				return nil, nil, err
			}
			if published {
				created = append(created, n) // known by its new name from here on
			}
		}
		if published {
			seen[n] = true
			tables = append(tables, n)
		}
	}
	return tables, created, nil
}

// indexTable finds the table of an index on the target: through the
// control connection, or the applying one (its batch settled) while the
// open target transaction holds DDL, which may have created the index.
func (a *Applier) indexTable(ctx context.Context, schema, name string) (ddl.TableName, bool, error) {
	var t ddl.TableName
	var q relmap.Querier
	if a.catalog != nil && !a.ddlUncommitted() {
		q = a.catalog
	} else if qc, ok := a.sess.Catalog().(pipeline.QueryCatalog); ok {
		if err := a.Settle(ctx); err != nil {
			return t, false, err
		}
		q = qc.Q
	} else {
		return t, false, nil
	}
	rows, err := q.Query(ctx, `SELECT tn.nspname, t.relname FROM pg_catalog.pg_index i
		JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_catalog.pg_class t ON t.oid = i.indrelid JOIN pg_catalog.pg_namespace tn ON tn.oid = t.relnamespace
		WHERE n.nspname = $1 AND c.relname = $2`, schema, name)
	if err != nil {
		return t, false, fmt.Errorf("looking up the table of index %s on the target: %w", sqlgen.QuoteQualified(schema, name), err)
	}
	defer rows.Close()
	found := false
	for rows.Next() {
		if err := rows.Scan(&t.Schema, &t.Name); err != nil {
			return t, false, err
		}
		found = true
	}
	return t, found, rows.Err()
}

// forgetRelations drops every relation's target mapping and prepared
// statements (the connection is idle: the batch was flushed): the next
// change of each maps it again from the target's catalog.
func (a *Applier) forgetRelations(ctx context.Context) {
	var names []string
	for _, e := range a.rels.Rels {
		for _, sd := range e.Stmts {
			names = append(names, "DEALLOCATE "+sqlgen.QuoteIdent(sd.Name))
		}
		a.rels.Rels[e.Rel.RelationID] = &relmap.Entry{Rel: e.Rel}
	}
	if len(names) > 0 {
		// Statements no longer used; a failure here only leaves them
		// prepared until the session ends.
		if err := a.sess.Exec(ctx, strings.Join(names, "; ")); err != nil {
			a.log.Debug().Err(err).Msg("deallocating prepared statements after DDL")
		}
	}
}
