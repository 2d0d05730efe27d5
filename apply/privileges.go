package apply

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/migrations"
)

// Privileges, checked once and listed at once (DESIGN.md invariant 10).
//
// Before anything is created on either side, one check asks both servers,
// with has_*_privilege for the connected role, for every privilege a run
// with this configuration will use, and reports every one that is missing
// in a single permanent error, each with the statement that grants it. The
// alternative, finding them one failed statement at a time, took six runs
// from a bare target role, and named UPDATE where SELECT was missing (the
// UPDATE's WHERE reads the columns that locate the row).
//
// What is checked is what the code uses:
//
//   - target, walapply's schema: CREATE on the database while the schema
//     does not exist (migrations create it); once it does, USAGE and CREATE
//     on it (or its ownership) and the ownership of its tables, which later
//     migrations alter;
//   - target, the replication origin functions (superuser-only until
//     granted): originFunctions;
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
		fmt.Fprintf(&b, "\nthe target role %s lacks privileges; run on the target, in database %s, as a superuser:", quoteIdent(e.TargetRole), quoteIdent(e.TargetDatabase))
		for _, s := range e.Target {
			b.WriteString("\n  " + s)
		}
	}
	if len(e.Source) > 0 {
		fmt.Fprintf(&b, "\nthe source role %s lacks privileges; run on the source, as a superuser:", quoteIdent(e.SourceRole))
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
	relName
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
		return t, r.Scan(&t.schema, &t.name, &t.insert, &t.update, &t.delete, &t.truncate, &t.schemaUsage, &t.selectable, &t.rowSecurity)
	})
	if err != nil {
		return nil, fmt.Errorf("listing the published tables on the source: %w", err)
	}
	return out, nil
}

// checkPrivilegesOn connects to the source for checkPrivileges, with the
// target connection given.
func checkPrivilegesOn(ctx context.Context, cfg *Config, target *pgx.Conn) error {
	source, err := connectSource(ctx, cfg, "check")
	if err != nil {
		return err
	}
	defer source.Close(context.WithoutCancel(ctx))
	return checkPrivileges(ctx, source, target, cfg)
}

// checkPrivileges runs the whole check: a permanent *PrivilegeError when
// anything is missing.
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
	return &PermanentError{e}
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
	r := quoteIdent(role)
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
		if !t.schemaUsage && !schemas[t.schema] {
			// Before the schema's first table (tables come sorted by
			// schema): SELECT alone reads nothing.
			schemas[t.schema] = true
			add("GRANT USAGE ON SCHEMA %s TO %s", quoteIdent(t.schema), r)
		}
		if !t.selectable {
			add("GRANT SELECT ON TABLE %s TO %s", quoteQualified(t.schema, t.name), r)
		}
		hidden = hidden || t.rowSecurity
	}
	if hidden && !bypassRLS {
		add("ALTER ROLE %s BYPASSRLS", r)
	}
	return out, nil
}

// originFunctions are the replication origin functions a run uses (all in
// pg_catalog; their argument lists are read from the server).
func originFunctions(cfg *Config) []string {
	fns := []string{
		"pg_replication_origin_create",        // the applier's origin, the copy workers'
		"pg_replication_origin_session_setup", // the apply session replays the origin
		"pg_replication_origin_xact_setup",    // each applied transaction advances it
		"pg_replication_origin_progress",      // where to resume, what to confirm
		// Moving the origin back after a COMMIT that failed once it was
		// set up (PostgreSQL 16+ advances the origin on abort) or a failed
		// PREPARE, and setting it to the copy's consistent point.
		"pg_replication_origin_session_reset",
		"pg_replication_origin_session_is_setup",
		"pg_replication_origin_advance",
	}
	if cfg.TwoPhase {
		fns = append(fns, "pg_replication_origin_xact_reset")
	}
	if cfg.Copy {
		fns = append(fns, "pg_replication_origin_drop") // the copy workers' origins
	}
	return fns
}

// tablePrivileges are the privileges a published table needs on the
// target. UPDATE and DELETE locate the row with a WHERE on its key (every
// column with REPLICA IDENTITY FULL), which needs SELECT; a copy checks
// that the table is empty; conflict policies other than "error" for
// insert_exists write INSERT ... ON CONFLICT, which DO UPDATE turns into
// an UPDATE that reads the key.
func tablePrivileges(t publishedTable, cfg *Config) []string {
	var need []string
	add := func(privs ...string) {
		for _, p := range privs {
			if !slices.Contains(need, p) {
				need = append(need, p)
			}
		}
	}
	if t.insert || cfg.Copy {
		add("INSERT")
		switch cfg.Conflicts[ConflictInsertExists] {
		case PolicyApply:
			add("SELECT", "UPDATE")
		case PolicySkip:
			add("SELECT")
		}
	}
	if cfg.Copy {
		add("SELECT")
	}
	if t.update {
		add("SELECT", "UPDATE")
	}
	if t.delete {
		add("SELECT", "DELETE")
	}
	if t.truncate {
		add("TRUNCATE")
	}
	order := []string{"SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE"}
	slices.SortFunc(need, func(a, b string) int { return slices.Index(order, a) - slices.Index(order, b) })
	return need
}

// targetFactsSQL reads the role, the server and walapply's schema.
const targetFactsSQL = `
SELECT r.rolname::text, r.rolsuper, pg_catalog.current_setting('server_version_num')::int, pg_catalog.current_database()::text,
       pg_catalog.has_database_privilege(pg_catalog.current_database(), 'CREATE'),
       s.oid IS NOT NULL,
       coalesce(pg_catalog.pg_has_role(s.nspowner, 'USAGE'), false),
       coalesce(pg_catalog.has_schema_privilege(s.oid, 'USAGE') AND pg_catalog.has_schema_privilege(s.oid, 'CREATE'), false),
       ARRAY(SELECT c.relname::text FROM pg_catalog.pg_class c
             WHERE c.relnamespace = s.oid AND c.relkind IN ('r', 'p') AND NOT pg_catalog.pg_has_role(c.relowner, 'USAGE')
             ORDER BY 1)
FROM pg_catalog.pg_roles r
LEFT JOIN pg_catalog.pg_namespace s ON s.nspname = $1
WHERE r.rolname = current_user`

// originFunctionsSQL reads the EXECUTE privilege on functions of
// pg_catalog by name, with their argument lists for the GRANT.
const originFunctionsSQL = `
SELECT p.proname::text, pg_catalog.pg_get_function_identity_arguments(p.oid), pg_catalog.has_function_privilege(p.oid, 'EXECUTE')
FROM pg_catalog.pg_proc p
WHERE p.pronamespace = 'pg_catalog'::pg_catalog.regnamespace AND p.proname = ANY ($1)
ORDER BY pg_catalog.array_position($1, p.proname::text), 2`

// targetTablePrivilegesSQL reads the role's privileges on the given tables
// that exist on the target.
const targetTablePrivilegesSQL = `
SELECT t.ord::int, pg_catalog.has_schema_privilege(n.oid, 'USAGE'),
       pg_catalog.has_table_privilege(c.oid, 'SELECT'), pg_catalog.has_table_privilege(c.oid, 'INSERT'),
       pg_catalog.has_table_privilege(c.oid, 'UPDATE'), pg_catalog.has_table_privilege(c.oid, 'DELETE'),
       pg_catalog.has_table_privilege(c.oid, 'TRUNCATE')
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS t(s, n, ord)
JOIN pg_catalog.pg_namespace n ON n.nspname = t.s
JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = t.n AND c.relkind IN ('r', 'p')
ORDER BY 1`

func targetPrivilegeProblems(ctx context.Context, target *pgx.Conn, cfg *Config, tables []publishedTable) ([]privilegeProblem, error) {
	var role, database string
	var super, canCreateDB, schemaExists, schemaOwned, schemaUsable bool
	var version int
	var foreignTables []string
	if err := target.QueryRow(ctx, targetFactsSQL, migrations.Schema).Scan(&role, &super, &version, &database,
		&canCreateDB, &schemaExists, &schemaOwned, &schemaUsable, &foreignTables); err != nil {
		return nil, err
	}
	if super {
		return nil, nil
	}
	r := quoteIdent(role)
	var out []privilegeProblem
	add := func(format string, args ...any) {
		out = append(out, privilegeProblem{side: "target", fix: fmt.Sprintf(format, args...)})
	}

	// walapply's schema.
	switch {
	case !schemaExists && !canCreateDB:
		add("GRANT CREATE ON DATABASE %s TO %s", quoteIdent(database), r)
	case schemaExists && !schemaOwned && !schemaUsable:
		add("GRANT USAGE, CREATE ON SCHEMA %s TO %s", quoteIdent(migrations.Schema), r)
	}
	for _, t := range foreignTables {
		add("ALTER TABLE %s OWNER TO %s", quoteQualified(migrations.Schema, t), r)
	}

	// The origin functions.
	rows, err := target.Query(ctx, originFunctionsSQL, originFunctions(cfg))
	if err != nil {
		return nil, err
	}
	type function struct {
		name, args string
		ok         bool
	}
	fns, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (function, error) {
		var f function
		return f, r.Scan(&f.name, &f.args, &f.ok)
	})
	if err != nil {
		return nil, err
	}
	for _, f := range fns {
		if !f.ok {
			add("GRANT EXECUTE ON FUNCTION pg_catalog.%s(%s) TO %s", f.name, f.args, r) // f.name: one of originFunctions, plain lower-case names
		}
	}

	// session_replication_role.
	if version >= 150000 {
		var ok bool
		if err := target.QueryRow(ctx, "SELECT pg_catalog.has_parameter_privilege('session_replication_role', 'SET')").Scan(&ok); err != nil {
			return nil, err
		}
		if !ok {
			add("GRANT SET ON PARAMETER session_replication_role TO %s", r)
		}
	} else {
		// Before PostgreSQL 15 the parameter cannot be granted.
		add("ALTER ROLE %s SUPERUSER /* PostgreSQL %s lets only a superuser set session_replication_role */", r, versionString(version))
	}

	// The published tables.
	schemas, names := make([]string, len(tables)), make([]string, len(tables))
	for i, t := range tables {
		schemas[i], names[i] = t.schema, t.name
	}
	rows, err = target.Query(ctx, targetTablePrivilegesSQL, schemas, names)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	usageAdded := map[string]bool{}
	for rows.Next() {
		var ord int
		var usage bool
		have := map[string]*bool{"SELECT": new(bool), "INSERT": new(bool), "UPDATE": new(bool), "DELETE": new(bool), "TRUNCATE": new(bool)}
		if err := rows.Scan(&ord, &usage, have["SELECT"], have["INSERT"], have["UPDATE"], have["DELETE"], have["TRUNCATE"]); err != nil {
			return nil, err
		}
		t := tables[ord-1]
		if !usage && !usageAdded[t.schema] {
			usageAdded[t.schema] = true
			add("GRANT USAGE ON SCHEMA %s TO %s", quoteIdent(t.schema), r)
		}
		var missing []string
		for _, p := range tablePrivileges(t, cfg) {
			if !*have[p] {
				missing = append(missing, p)
			}
		}
		if len(missing) > 0 {
			add("GRANT %s ON TABLE %s TO %s", strings.Join(missing, ", "), quoteQualified(t.schema, t.name), r)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
