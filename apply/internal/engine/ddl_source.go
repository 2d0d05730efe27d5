package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/internal/ddl"
)

// publishedOID reports whether a source table is published: the session
// has had a Relation message for it, else the source's publications say
// so (by OID, whatever its name now). Answers are kept for the session.
func (a *Applier) publishedOID(ctx context.Context, oid uint32) (bool, error) {
	d := a.ddl
	if _, ok := a.rels.Rels[oid]; ok {
		return true, nil
	}
	if p, ok := d.oids[oid]; ok {
		return p, nil
	}
	src, err := d.sourceConn(ctx)
	if err != nil {
		return false, err
	}
	if !a.machine.InPrepare() { // (a prepared one stays invisible until COMMIT PREPARED)
		visible, err := waitVisible(ctx, src, a.txn.xid, 10*time.Second)
		if err != nil {
			d.closeSource(ctx)
			return false, fmt.Errorf("waiting for source transaction %d to end before asking whether table OID %d is published (--ddl): %w", a.txn.xid, oid, err)
		}
		if !visible {
			a.log.Warn().Uint32("xid", a.txn.xid).Uint32("oid", oid).Msg("source transaction still running for new snapshots after 10 seconds: asking whether its table is published anyway")
		}
	}
	var p bool
	if err := src.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_publication p, pg_catalog.pg_get_publication_tables(p.pubname) t
		WHERE p.pubname = ANY ($1) AND t.relid = $2)`, d.publications, oid).Scan(&p); err != nil {
		d.closeSource(ctx)
		return false, fmt.Errorf("asking the source whether table OID %d is published (--ddl): %w", oid, err)
	}
	d.oids[oid] = p
	return p, nil
}

// verifyDDL asks the source whether the capture signed msg in this
// transaction, and returns the drop messages it signed (ddl.Install).
func (a *Applier) verifyDDL(ctx context.Context, msg *ddl.Message, drops []*ddl.Message) (bool, []*ddl.Message, error) {
	all := append([]*ddl.Message{msg}, drops...)
	xids := make([]uint32, len(all))
	for i := range xids {
		xids[i] = a.txn.xid
	}
	st := a.ddl.queries[msg.Key]
	if st != nil {
		for _, p := range st.pending {
			all, xids = append(all, p.m), append(xids, p.xid)
		}
	}
	bodies, sigs := make([]string, len(all)), make([]string, len(all))
	for i, m := range all {
		bodies[i], sigs[i] = m.Body, m.Sig
	}
	src, err := a.ddl.sourceConn(ctx)
	if err != nil {
		return false, nil, err
	}
	var oks []bool
	if err := src.QueryRow(ctx, `SELECT array_agg(walapply_ddl.verify(b, s) ORDER BY n) FROM unnest($1::text[], $2::text[]) WITH ORDINALITY u(b, s, n)`, bodies, sigs).Scan(&oks); err != nil {
		a.ddl.closeSource(ctx)
		return false, nil, fmt.Errorf("verifying a captured DDL statement on the source: %w", err)
	}
	for i, m := range all {
		// Signed, and in the transaction it was made in: a genuine
		// message copied into another transaction names the first.
		oks[i] = oks[i] && m.Xid == xids[i]
	}
	if err := a.ddl.checkCount(st, msg, oks[1+len(drops):]); err != nil {
		return false, nil, err
	}
	var signed []*ddl.Message
	for i, m := range drops {
		if oks[i+1] {
			signed = append(signed, m)
		} else {
			a.log.Warn().Stringer("lsn", a.txn.finalLSN).Msg("a walapply.ddl drop message that the source's DDL capture did not sign in this transaction: ignored")
		}
	}
	return oks[0], signed, nil
}

// sourceConn returns the session's plain connection to the source for
// --ddl's questions (verifyDDL, publishedOID), made at the first one: the
// replication connection is streaming. DDL is rare; the connection is
// kept for the session and closed with it (close), or after a failed
// question.
func (d *DDLState) sourceConn(ctx context.Context) (*pgx.Conn, error) {
	if d.src != nil && !d.src.IsClosed() {
		return d.src, nil
	}
	src, err := d.dial.Source(ctx, "ddl")
	if err != nil {
		return nil, err
	}
	d.src = src
	return src, nil
}

// closeSource closes the connection of sourceConn, if any.
func (d *DDLState) closeSource(ctx context.Context) {
	if d != nil && d.src != nil {
		_ = d.src.Close(context.WithoutCancel(ctx))
		d.src = nil
	}
}

// DDLString is what the session has seen of the DDL events of one client
// query string (ddl.Message.Key): the capture numbers them (Seq) with a
// count kept in a session setting, which any role may set, so the
// capture signs its value, and a role can only set it back (to none, or
// to an earlier value of its own string). Then an event repeats a number,
// and the statement run for it would be another than the one that fired.
// So the events of a string, also the marks of those that are not
// replicated, must come numbered one after the other: checked at each
// statement that runs, over those seen since the last, verified with it.
// The first event seen of a string may have any number (the session may
// have started in its middle). The session remembers the last
// maxDDLStrings strings.
type DDLString struct {
	last    int            // the last verified number; 0: none yet
	pending []pendingEvent // seen since, not verified
}

// pendingEvent is a counted event and the xid of the transaction it came in.
type pendingEvent struct {
	m   *ddl.Message
	xid uint32
}

const maxDDLStrings = 4096

// countEvent records a counted event of a query string; many of them
// are verified at once (a string of many statements on other tables).
func (a *Applier) countEvent(ctx context.Context, m *ddl.Message) error {
	d := a.ddl
	if m.Key == "" {
		return nil
	}
	st := d.queries[m.Key]
	if st == nil {
		if len(d.queries) >= maxDDLStrings {
			clear(d.queries)
		}
		st = &DDLString{}
		d.queries[m.Key] = st
	}
	st.pending = append(st.pending, pendingEvent{m, a.txn.xid})
	if len(st.pending) < 16 {
		return nil
	}
	src, err := d.sourceConn(ctx)
	if err != nil {
		return err
	}
	bodies, sigs := make([]string, len(st.pending)), make([]string, len(st.pending))
	for i, p := range st.pending {
		bodies[i], sigs[i] = p.m.Body, p.m.Sig
	}
	var oks []bool
	if err := src.QueryRow(ctx, `SELECT array_agg(walapply_ddl.verify(b, s) ORDER BY n) FROM unnest($1::text[], $2::text[]) WITH ORDINALITY u(b, s, n)`, bodies, sigs).Scan(&oks); err != nil {
		d.closeSource(ctx)
		return fmt.Errorf("verifying captured DDL events on the source: %w", err)
	}
	for i, p := range st.pending {
		oks[i] = oks[i] && p.m.Xid == p.xid
	}
	if err := d.checkCount(st, m, oks); err != nil {
		var de *DDLError
		if errors.As(err, &de) {
			de.LSN = a.txn.finalLSN
		}
		return &PermanentError{Err: err}
	}
	return nil
}

// checkCount checks the numbers of a string's events seen since its last
// verified one (st.pending), now verified (ok): those the capture signed
// must follow each other.
func (d *DDLState) checkCount(st *DDLString, msg *ddl.Message, ok []bool) error {
	if st == nil {
		return nil
	}
	for i, p := range st.pending {
		if !ok[i] {
			continue // forged: not an event
		}
		if st.last != 0 && p.m.Seq != st.last+1 {
			return &DDLError{Statement: msg.Query, Err: fmt.Errorf("%w: its query string's DDL events are numbered %d, then %d (the capture's count in the source session was set back, or the string rolled back DDL)", ddl.ErrMismatch, st.last, p.m.Seq)}
		}
		st.last = p.m.Seq
	}
	st.pending = st.pending[:0]
	return nil
}

// visibleSQL tells whether the source transaction whose 32-bit xid is $1
// has ended for a snapshot taken now: its full xid is the one below the
// snapshot's xmax with those low 32 bits.
const visibleSQL = `SELECT pg_catalog.pg_visible_in_snapshot(
	(CASE WHEN f >= x THEN f - 4294967296 ELSE f END)::text::xid8, s)
FROM (SELECT s, pg_catalog.pg_snapshot_xmax(s)::text::bigint AS x,
	(pg_catalog.pg_snapshot_xmax(s)::text::bigint & -4294967296) | $1::bigint AS f
	FROM pg_catalog.pg_current_snapshot() AS s) q`

// waitVisible waits until the source transaction xid, whose commit the
// stream has just delivered, is visible to new snapshots on the source.
//
// The walsender decodes and sends a commit as soon as its record is in the
// WAL, a moment before the committing backend leaves the source's
// ProcArray; until then a new snapshot still sees the transaction as
// running. A catalog question about what that transaction created (is its
// new partition published?) asked in that moment gets the answer from
// before it, which on a busy machine is more than a theoretical window.
// The wait is short (the backend is finishing its commit); it gives up
// after limit and reports false.
func waitVisible(ctx context.Context, src *pgx.Conn, xid uint32, limit time.Duration) (bool, error) {
	deadline := time.Now().Add(limit)
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		var visible bool
		if err := src.QueryRow(ctx, visibleSQL, int64(xid)).Scan(&visible); err != nil {
			return false, err
		}
		if visible || time.Now().After(deadline) {
			return visible, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(delay):
		}
	}
}
