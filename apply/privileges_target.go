package apply

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/migrations"
)

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
	slices.SortFunc(need, func(a, b string) int {
		return slices.Index(tablePrivilegeNames[:], a) - slices.Index(tablePrivilegeNames[:], b)
	})
	return need
}

// tablePrivilegeNames are the table privileges checked, in the order a
// GRANT lists them.
var tablePrivilegeNames = [...]string{"SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE"}

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

// targetPrivilegeProblems returns what the target role lacks, in the
// order the statements must run: walapply's schema, the origin functions,
// the parameter, then per schema its USAGE before its tables' grants.
//
// The target's part of the privilege check (privileges.go).
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
	r := sqlgen.QuoteIdent(role)
	var out []privilegeProblem
	add := func(format string, args ...any) {
		out = append(out, privilegeProblem{side: "target", fix: fmt.Sprintf(format, args...)})
	}

	// walapply's schema.
	switch {
	case !schemaExists && !canCreateDB:
		add("GRANT CREATE ON DATABASE %s TO %s", sqlgen.QuoteIdent(database), r)
	case schemaExists && !schemaOwned && !schemaUsable:
		add("GRANT USAGE, CREATE ON SCHEMA %s TO %s", sqlgen.QuoteIdent(migrations.Schema), r)
	}
	for _, t := range foreignTables {
		add("ALTER TABLE %s OWNER TO %s", sqlgen.QuoteQualified(migrations.Schema, t), r)
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
		schemas[i], names[i] = t.Schema, t.Name
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
		var have [len(tablePrivilegeNames)]bool // in tablePrivilegeNames' order
		if err := rows.Scan(&ord, &usage, &have[0], &have[1], &have[2], &have[3], &have[4]); err != nil {
			return nil, err
		}
		t := tables[ord-1]
		if !usage && !usageAdded[t.Schema] {
			usageAdded[t.Schema] = true
			add("GRANT USAGE ON SCHEMA %s TO %s", sqlgen.QuoteIdent(t.Schema), r)
		}
		var missing []string
		for _, p := range tablePrivileges(t, cfg) {
			if !have[slices.Index(tablePrivilegeNames[:], p)] {
				missing = append(missing, p)
			}
		}
		if len(missing) > 0 {
			add("GRANT %s ON TABLE %s TO %s", strings.Join(missing, ", "), sqlgen.QuoteQualified(t.Schema, t.Name), r)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
