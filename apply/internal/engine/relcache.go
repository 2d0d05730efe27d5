package engine

import (
	"context"
	"errors"

	"github.com/walapply/walapply/apply/internal/pipeline"
	"github.com/walapply/walapply/apply/internal/relmap"
)

// mappedRelation returns the entry of a relation, mapped onto the target
// (relmap.Cache.Map); a target table that does not fit is a SchemaError
// naming the relation.
func mappedRelation(ctx context.Context, c *relmap.Cache, cat relmap.Catalog, relid uint32) (*relmap.Entry, error) {
	e := c.Rels[relid]
	if e == nil {
		return nil, OrderError("change for relation OID %d before its Relation message", relid)
	}
	if e.Mapped {
		return e, nil
	}
	if err := c.Map(ctx, cat, e); err != nil {
		var m *relmap.Mismatch
		if errors.As(err, &m) {
			return nil, &SchemaError{Relation: e.String(), Column: m.Column, Problem: m.Problem, Hint: m.Hint}
		}
		return nil, err
	}
	return e, nil
}

// relation returns the source relation relid mapped onto its target table,
// looking the target up in its catalog on first use; an error names the
// source transaction and op.
func (a *Applier) relation(ctx context.Context, relid uint32, op pipeline.Op) (*relmap.Entry, error) {
	u := a.rels.Rels[relid]
	if u != nil && u.Mapped {
		return u, nil
	}
	var e *relmap.Entry
	var err error
	if u != nil && (a.tables != nil || a.catalog != nil && !a.ddlUncommitted()) {
		cat := a.tables
		if cat == nil {
			cat = controlCatalog{a.catalog}
		}
		e, err = mappedRelation(ctx, a.rels, cat, relid)
	} else {
		if u != nil && a.sess.Busy() {
			// The catalog lookup needs the connection.
			if err := a.Settle(ctx); err != nil {
				return nil, err
			}
		}
		e, err = mappedRelation(ctx, a.rels, a.sess.Catalog(), relid)
	}
	if err != nil {
		rel := ""
		if e := a.rels.Rels[relid]; e != nil {
			rel = e.String()
		}
		return nil, &TxnError{Xid: a.txn.xid, CommitLSN: a.txn.finalLSN, Relation: rel, Op: op.String(), Err: err}
	}
	return e, nil
}
