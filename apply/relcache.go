package apply

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/protocol"
)

// firstNonBuiltinOID: type OIDs below it are the same on every cluster
// (FirstGenbkiObjectId in PostgreSQL's sources).
const firstNonBuiltinOID = 10000

// relEntry is one source relation and how it maps onto the target.
type relEntry struct {
	rel *protocol.Relation // as last described by the source

	mapped bool
	target *targetTable
	// tcol[i] is the target column of source column i, or -1 when the
	// target column is generated and so never written.
	tcol []int
	// key lists the source columns of the replica identity.
	key []int

	// stmts caches prepared statements by shape (see shapeKey).
	stmts map[string]*pgconn.StatementDescription
	// params names, for the SQL of each row statement in stmts, the source
	// column of each parameter ($1 first; parameters after them, such as
	// a conflict wrapper's, are not columns): an error about a parameter
	// then names its column (withColumn).
	params map[string][]string

	// compact caches compactable's answer for this entry (0: not asked
	// yet, 1: yes, 2: no); the policies do not change within a session.
	compact uint8

	// name is String's answer, rendered once: conflict records name the
	// relation per change (appendRecordParams).
	name string
}

// noteParams records the columns of a statement's parameters.
func (e *relEntry) noteParams(sql string, columns []string) {
	if e.params == nil {
		e.params = map[string][]string{}
	}
	e.params[sql] = columns
}

// String names the relation for messages: schema.name as the source has it.
func (e *relEntry) String() string {
	if e.name == "" {
		e.name = quoteQualified(sourceSchema(e.rel.Namespace), e.rel.Name)
	}
	return e.name
}

// logName names the relation in log fields (logRelation).
func (e *relEntry) logName() string { return logRelation(sourceSchema(e.rel.Namespace), e.rel.Name) }

func sourceSchema(ns string) string {
	if ns == "" {
		return "pg_catalog"
	}
	return ns
}

// relationCache keeps the source's Relation and Type messages, and for each
// relation the target table it maps onto, its column mapping and its
// prepared statements. A Relation message for a known OID replaces the entry:
// the source resends it whenever the definition may have changed, so a
// column added or dropped mid-stream takes effect at the next change.
type relationCache struct {
	rels   map[uint32]*relEntry
	types  map[uint32]*protocol.TypeMessage
	binary bool
}

// newRelationCache returns an empty cache; binary says the stream carries
// binary-format values, which need the target types to match exactly.
func newRelationCache(binary bool) *relationCache {
	return &relationCache{rels: map[uint32]*relEntry{}, types: map[uint32]*protocol.TypeMessage{}, binary: binary}
}

// PutRelation remembers a Relation message. rel must not be reused by the
// caller (protocol.Relation.Decode allocates a fresh value).
func (c *relationCache) PutRelation(rel *protocol.Relation) {
	c.rels[rel.RelationID] = &relEntry{rel: rel}
}

// PutType remembers a Type message.
func (c *relationCache) PutType(t *protocol.TypeMessage) {
	cp := *t
	c.types[t.TypeOID] = &cp
}

// get returns the entry of a relation, mapped onto the target.
func (c *relationCache) get(ctx context.Context, cat tableCatalog, relid uint32) (*relEntry, error) {
	e := c.rels[relid]
	if e == nil {
		return nil, orderError("change for relation OID %d before its Relation message", relid)
	}
	if e.mapped {
		return e, nil
	}
	if err := c.mapTarget(ctx, cat, e); err != nil {
		return nil, err
	}
	return e, nil
}

// mapTarget finds the target table of a source relation: by schema and
// name, columns by name (PostgreSQL's subscriber does the same).
func (c *relationCache) mapTarget(ctx context.Context, cat tableCatalog, e *relEntry) error {
	schema := sourceSchema(e.rel.Namespace)
	t, found, err := cat.lookupTable(ctx, schema, e.rel.Name)
	if err != nil {
		return err
	}
	if !found {
		return &SchemaError{Relation: e.String(), Problem: "the target table does not exist",
			Hint: "create it on the target with the source's columns (the schema is yours to manage, as with PostgreSQL's subscriber), then restart"}
	}
	e.target = t
	e.tcol = make([]int, len(e.rel.Columns))
	e.key = e.key[:0]
	var missing []string
	for i, sc := range e.rel.Columns {
		ti, ok := t.column(sc.Name)
		if !ok {
			missing = append(missing, quoteIdent(sc.Name))
			continue
		}
		tc := t.Columns[ti]
		if tc.Generated {
			if sc.IsKey() {
				return &SchemaError{Relation: e.String(), Column: sc.Name,
					Problem: "the replica identity column is a generated column on the target",
					Hint:    "make the target column an ordinary column"}
			}
			e.tcol[i] = -1
		} else {
			e.tcol[i] = ti
		}
		if c.binary && sc.TypeOID < firstNonBuiltinOID && tc.TypeOID != sc.TypeOID {
			return &SchemaError{Relation: e.String(), Column: sc.Name,
				Problem: fmt.Sprintf("binary transfer needs the same type on both sides, but the target column is %s (source type OID %d)", tc.TypeName, sc.TypeOID),
				Hint:    "change the target column's type to the source's, or run without --binary"}
		}
		if sc.IsKey() {
			e.key = append(e.key, i)
		}
	}
	if len(missing) > 0 {
		return &SchemaError{Relation: e.String(), Column: fmt.Sprint(missing),
			Problem: fmt.Sprintf("the target table is missing replicated column(s) %v", missing),
			Hint:    "add the column(s) to the target table, then restart"}
	}
	e.stmts = map[string]*pgconn.StatementDescription{}
	e.mapped = true
	return nil
}

// relation returns the source relation relid mapped onto its target table,
// looking the target up in its catalog on first use; an error names the
// source transaction and op.
func (a *applier) relation(ctx context.Context, relid uint32, op opKind) (*relEntry, error) {
	u := a.rels.rels[relid]
	if u != nil && u.mapped {
		return u, nil
	}
	var e *relEntry
	var err error
	if u != nil && (a.tables != nil || a.catalog != nil && !a.ddlUncommitted()) {
		cat := a.tables
		if cat == nil {
			cat = controlCatalog{a.catalog}
		}
		e, err = a.rels.get(ctx, cat, relid)
	} else {
		if u != nil && a.sess.busy() {
			// The catalog lookup needs the connection.
			if err := a.Settle(ctx); err != nil {
				return nil, err
			}
		}
		e, err = a.rels.get(ctx, a.sess.catalog(), relid)
	}
	if err != nil {
		rel := ""
		if e := a.rels.rels[relid]; e != nil {
			rel = e.String()
		}
		return nil, &TxnError{Xid: a.txn.xid, CommitLSN: a.txn.finalLSN, Relation: rel, Op: op.String(), Err: err}
	}
	return e, nil
}
