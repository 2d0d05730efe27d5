package apply

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/walapply/walapply/apply/internal/engine"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/internal/ddl"
)

// ddlPublications reads, through the source's replication connection,
// what --ddl needs of the publications: whether one is FOR ALL TABLES and
// the schemas of FOR TABLES IN SCHEMA ones (PostgreSQL 15+).
func (s *session) ddlPublications(ctx context.Context) (*engine.DDLState, error) {
	lits := make([]string, len(s.cfg.Publications))
	for i, p := range s.cfg.Publications {
		lits[i] = sqlgen.QuoteLiteral(p)
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
	allTables, schemas := false, map[string]bool{}
	for _, r := range rs {
		for _, row := range r.Rows {
			if string(row[0]) == "all" {
				allTables = true
			} else {
				schemas[string(row[1])] = true
			}
		}
	}
	return engine.NewDDLState(configDialer{s.cfg}, s.cfg.Publications, allTables, schemas), nil
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
