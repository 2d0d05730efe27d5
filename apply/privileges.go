package apply

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/apply/internal/sqlgen"
)

// privilegeProblem is one missing privilege: the statement that grants it,
// to be run on side ("source" or "target") by a superuser.
type privilegeProblem struct {
	side string
	fix  string // without the semicolon
}

func (p privilegeProblem) String() string { return p.fix + ";" }

// PrivilegeError lists every privilege walapply's roles lack, on both
// sides, with the statements that grant them. Nothing was created.
type PrivilegeError struct {
	SourceRole, TargetRole string
	TargetDatabase         string
	Source, Target         []string // the statements, each ending in ";"
}

func (e *PrivilegeError) Error() string {
	var b strings.Builder
	b.WriteString("walapply's roles lack privileges it needs; this start changed nothing. Grant them and start again:")
	if len(e.Target) > 0 {
		fmt.Fprintf(&b, "\nthe target role %s lacks privileges; run on the target, in database %s, as a superuser:", sqlgen.QuoteIdent(e.TargetRole), sqlgen.QuoteIdent(e.TargetDatabase))
		for _, s := range e.Target {
			b.WriteString("\n  " + s)
		}
	}
	if len(e.Source) > 0 {
		fmt.Fprintf(&b, "\nthe source role %s lacks privileges; run on the source, as a superuser:", sqlgen.QuoteIdent(e.SourceRole))
		for _, s := range e.Source {
			b.WriteString("\n  " + s)
		}
	}
	return b.String()
}

// publishedTable is a table the publications publish, with the operations
// they publish for it (the union over the publications) and the source
// role's access to it.
type publishedTable struct {
	sqlgen.Rel
	insert, update, delete, truncate bool
	schemaUsage                      bool // USAGE on its schema
	selectable                       bool // SELECT on it
	rowSecurity                      bool // row-level security is enabled and the role is not its owner
}

// publishedOpsSQL lists the publications' tables, as the stream names them
// (pg_publication_tables: the root of a partitioned table published via
// its root, each partition otherwise), with their published operations.
const publishedOpsSQL = `
SELECT t.schemaname::text, t.tablename::text,
       bool_or(p.pubinsert), bool_or(p.pubupdate), bool_or(p.pubdelete), bool_or(p.pubtruncate),
       pg_catalog.has_schema_privilege(n.oid, 'USAGE'), pg_catalog.has_table_privilege(c.oid, 'SELECT'),
       c.relrowsecurity AND NOT pg_catalog.pg_has_role(c.relowner, 'USAGE')
FROM pg_catalog.pg_publication_tables t
JOIN pg_catalog.pg_publication p ON p.pubname = t.pubname
JOIN pg_catalog.pg_namespace n ON n.nspname = t.schemaname
JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = t.tablename
WHERE t.pubname = ANY ($1)
GROUP BY 1, 2, n.oid, c.oid, c.relrowsecurity, c.relowner
ORDER BY 1, 2`

// listPublishedOps returns the tables cfg.Publications publish on the
// source. Publications that do not exist are left out (the publication
// check names them).
func listPublishedOps(ctx context.Context, source *pgx.Conn, pubs []string) ([]publishedTable, error) {
	rows, err := source.Query(ctx, publishedOpsSQL, pubs)
	if err != nil {
		return nil, fmt.Errorf("listing the published tables on the source: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (publishedTable, error) {
		var t publishedTable
		return t, r.Scan(&t.Schema, &t.Name, &t.insert, &t.update, &t.delete, &t.truncate, &t.schemaUsage, &t.selectable, &t.rowSecurity)
	})
	if err != nil {
		return nil, fmt.Errorf("listing the published tables on the source: %w", err)
	}
	return out, nil
}

// checkPrivileges runs the whole check: a permanent *PrivilegeError when
// anything is missing.
//
// Privileges, checked once and listed at once (DESIGN.md invariant 10).
//
// Before anything is created on either side, one check asks both servers,
// with has_*_privilege for the connected role, for every privilege a run
// with this configuration will use, and reports every one that is missing
// in a single permanent error, each with the statement that grants it. The
// alternative, finding them one failed statement at a time, took a run per
// privilege from a bare target role, and named UPDATE where SELECT was
// missing (the UPDATE's WHERE reads the columns that locate the row).
//
// What is checked is what the code uses:
//
//   - target, walapply's schema: CREATE on the database while the schema
//     does not exist (migrations create it); once it does, USAGE and CREATE
//     on it (or its ownership) and the ownership of its tables, which later
//     migrations alter;
//   - target, the replication origin functions (superuser-only until
//     granted): originFunctions (privileges_target.go, with the rest of
//     the target's part);
//   - target, SET on session_replication_role (PostgreSQL 15+; before, only
//     a superuser may set it);
//   - target, per published table that exists there: USAGE on its schema
//     and the privileges of the operations its publications publish
//     (tablePrivileges);
//   - source: the REPLICATION attribute, and with --copy USAGE and SELECT on
//     every published table. A source table with row-level security that
//     applies to the role would be copied without the rows its policies
//     hide, silently: the role must be its owner or BYPASSRLS.
//
// A superuser has everything; a missing publication or target table is not
// a privilege problem and is left to the checks that name those.
func checkPrivileges(ctx context.Context, source, target *pgx.Conn, cfg *Config) error {
	tables, err := listPublishedOps(ctx, source, cfg.Publications)
	if err != nil {
		return err
	}
	problems, err := privilegeProblems(ctx, source, target, cfg, tables)
	if err != nil || len(problems) == 0 {
		return err
	}
	e := &PrivilegeError{}
	if err := source.QueryRow(ctx, "SELECT current_user::text").Scan(&e.SourceRole); err != nil {
		return fmt.Errorf("checking privileges on the source: %w", err)
	}
	if err := target.QueryRow(ctx, "SELECT current_user::text, current_database()::text").Scan(&e.TargetRole, &e.TargetDatabase); err != nil {
		return fmt.Errorf("checking privileges on the target: %w", err)
	}
	for _, p := range problems {
		if p.side == "source" {
			e.Source = append(e.Source, p.String())
		} else {
			e.Target = append(e.Target, p.String())
		}
	}
	return &PermanentError{Err: e}
}

// privilegeProblems returns every privilege a run of cfg over tables (the
// published tables) needs and the connected roles lack: the target's
// first, then the source's.
func privilegeProblems(ctx context.Context, source, target *pgx.Conn, cfg *Config, tables []publishedTable) ([]privilegeProblem, error) {
	out, err := targetPrivilegeProblems(ctx, target, cfg, tables)
	if err != nil {
		return nil, fmt.Errorf("checking privileges on the target: %w", err)
	}
	src, err := sourcePrivilegeProblems(ctx, source, cfg, tables)
	if err != nil {
		return nil, fmt.Errorf("checking privileges on the source: %w", err)
	}
	return append(out, src...), nil
}

func sourcePrivilegeProblems(ctx context.Context, source *pgx.Conn, cfg *Config, tables []publishedTable) ([]privilegeProblem, error) {
	var role string
	var super, replication, bypassRLS bool
	if err := source.QueryRow(ctx, `SELECT rolname::text, rolsuper, rolreplication, rolbypassrls FROM pg_catalog.pg_roles WHERE rolname = current_user`).
		Scan(&role, &super, &replication, &bypassRLS); err != nil {
		return nil, err
	}
	if super {
		return nil, nil
	}
	r := sqlgen.QuoteIdent(role)
	var out []privilegeProblem
	add := func(format string, args ...any) {
		out = append(out, privilegeProblem{side: "source", fix: fmt.Sprintf(format, args...)})
	}
	if !replication {
		add("ALTER ROLE %s REPLICATION", r)
	}
	if !cfg.Copy {
		return out, nil
	}
	schemas := map[string]bool{}
	hidden := false
	for _, t := range tables {
		if !t.schemaUsage && !schemas[t.Schema] {
			// Before the schema's first table (tables come sorted by
			// schema): SELECT alone reads nothing.
			schemas[t.Schema] = true
			add("GRANT USAGE ON SCHEMA %s TO %s", sqlgen.QuoteIdent(t.Schema), r)
		}
		if !t.selectable {
			add("GRANT SELECT ON TABLE %s TO %s", sqlgen.QuoteQualified(t.Schema, t.Name), r)
		}
		hidden = hidden || t.rowSecurity
	}
	if hidden && !bypassRLS {
		add("ALTER ROLE %s BYPASSRLS", r)
	}
	return out, nil
}
