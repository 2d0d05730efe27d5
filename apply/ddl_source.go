package apply

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/walapply/walapply/internal/ddl"
)

// publishedOID reports whether a source table is published: the session
// has had a Relation message for it, else the source's publications say
// so (by OID, whatever its name now). Answers are kept for the session.
func (a *applier) publishedOID(ctx context.Context, oid uint32) (bool, error) {
	d := a.ddl
	if _, ok := a.rels.Rels[oid]; ok {
		return true, nil
	}
	if p, ok := d.oids[oid]; ok {
		return p, nil
	}
	src, err := connectSource(ctx, d.cfg, "ddl")
	if err != nil {
		return false, err
	}
	defer src.Close(context.WithoutCancel(ctx))
	var p bool
	if err := src.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_publication p, pg_catalog.pg_get_publication_tables(p.pubname) t
		WHERE p.pubname = ANY ($1) AND t.relid = $2)`, d.cfg.Publications, oid).Scan(&p); err != nil {
		return false, fmt.Errorf("asking the source whether table OID %d is published (--ddl): %w", oid, err)
	}
	d.oids[oid] = p
	return p, nil
}

// verifyDDL asks the source whether the capture signed msg, and returns
// the drop messages it signed (ddl.Install): a plain connection of its
// own, for the statement only (DDL is rare; the replication connection is
// streaming).
func (a *applier) verifyDDL(ctx context.Context, msg *ddl.Message, drops []*ddl.Message) (bool, []*ddl.Message, error) {
	all := append([]*ddl.Message{msg}, drops...)
	bodies, sigs := make([]string, len(all)), make([]string, len(all))
	for i, m := range all {
		bodies[i], sigs[i] = m.Body, m.Sig
	}
	src, err := connectSource(ctx, a.ddl.cfg, "ddl")
	if err != nil {
		return false, nil, err
	}
	defer src.Close(context.WithoutCancel(ctx))
	var oks []bool
	if err := src.QueryRow(ctx, `SELECT array_agg(walapply_ddl.verify(b, s) ORDER BY n) FROM unnest($1::text[], $2::text[]) WITH ORDINALITY u(b, s, n)`, bodies, sigs).Scan(&oks); err != nil {
		return false, nil, fmt.Errorf("verifying a captured DDL statement on the source: %w", err)
	}
	var signed []*ddl.Message
	for i, m := range drops {
		if oks[i+1] {
			signed = append(signed, m)
		} else {
			a.log.Warn().Stringer("lsn", a.txn.finalLSN).Msg("a walapply.ddl drop message that the source's DDL capture did not sign: ignored")
		}
	}
	return oks[0], signed, nil
}

// ddlPublications reads, through the source's replication connection,
// what --ddl needs of the publications: whether one is FOR ALL TABLES and
// the schemas of FOR TABLES IN SCHEMA ones (PostgreSQL 15+).
func (s *session) ddlPublications(ctx context.Context) (*ddlState, error) {
	d := &ddlState{schemas: map[string]bool{}, created: map[relName]bool{}, oids: map[uint32]bool{}, cfg: s.cfg}
	lits := make([]string, len(s.cfg.Publications))
	for i, p := range s.cfg.Publications {
		lits[i] = quoteLiteral(p)
	}
	in := strings.Join(lits, ", ")
	q := "SELECT 'all', '' FROM pg_catalog.pg_publication WHERE puballtables AND pubname IN (" + in + ")"
	if s.source.ServerVersion() >= 150000 {
		q += " UNION SELECT 'schema', n.nspname FROM pg_catalog.pg_publication_namespace pn JOIN pg_catalog.pg_publication p ON p.oid = pn.pnpubid JOIN pg_catalog.pg_namespace n ON n.oid = pn.pnnspid WHERE p.pubname IN (" + in + ")"
	}
	rs, err := s.source.PgConn().Exec(ctx, q).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("reading the publications' definitions on the source (--ddl): %w", err)
	}
	for _, r := range rs {
		for _, row := range r.Rows {
			if string(row[0]) == "all" {
				d.allTables = true
			} else {
				d.schemas[string(row[1])] = true
			}
		}
	}
	return d, nil
}

// checkDDL: --ddl needs the capture installed on the source (walapply ddl
// install) and messages in pgoutput (PostgreSQL 14+).
func checkDDL(ctx context.Context, s *session, f *preflightFacts) ([]error, error) {
	if !s.cfg.DDL {
		return nil, nil
	}
	if f.version < 140000 {
		return []error{fmt.Errorf("%w: --ddl needs PostgreSQL 14 or later on the source (logical messages in pgoutput), which is %s", ErrNotSupported, versionString(f.version))}, nil
	}
	err := ddl.CheckInstalled(ctx, s.source.PgConn())
	if errors.Is(err, ddl.ErrNotInstalled) {
		return []error{fmt.Errorf("--ddl: %w", err)}, nil
	}
	return nil, err
}
