// Package ddl is walapply's DDL capture: the event triggers that
// `walapply ddl install` puts on the source, and the message they emit.
//
// Capture. Two event triggers, on sql_drop and ddl_command_end, call small
// SECURITY INVOKER functions that call walapply_ddl.capture, a SECURITY
// DEFINER function owned by the installing role: only it may call
// pg_logical_emit_message, which needs the REPLICATION attribute, and it
// runs with search_path = pg_catalog, so a role running DDL cannot
// redirect what it calls. It reads what it sends itself (current_query(),
// pg_event_trigger_ddl_commands(), pg_event_trigger_dropped_objects(), each
// of which works only inside an event trigger), so a direct call outside
// one fails; only the search_path and role in force come from the wrapper.
// Temporary objects are left out at the source (a session's temporary
// table is never published, and applications create many). Each call
// emits one transactional logical message with the prefix
// Prefix, so it is decoded with its transaction, at its place, and not at
// all when that (sub)transaction rolls back. sql_drop fires before
// ddl_command_end of the same statement: its message (Kind "drop") lists
// the dropped objects, the one of ddl_command_end (Kind "command") the
// created or altered ones and the query text; the applier pairs them.
//
// One query string, several statements. current_query() is the whole
// string the client sent, which may hold several statements (the simple
// query protocol: psql -c "a; b", golang-migrate and similar tools send a
// migration file as one string), or a call of a function or a DO block
// that runs DDL. The capture numbers the statements of one client message
// that fire ddl_command_end (Seq, 1 first; the message is recognised by its
// statement_timestamp(), which is the same for all of them, and text; the
// count is a session setting, so a COMMIT in the string keeps it), and
// sends the event's command tag (TG_TAG). DDL run from inside a function,
// procedure or DO block is told apart by the call stack (PG_CONTEXT has
// frames below the event trigger's): it gets Seq 0 and is not counted.
// REINDEX (which fires from PostgreSQL 17 on) is not captured. The applier
// replays the Seq-th statement of the string that fires the trigger
// (Statement), after checking that it is one the event's tag names. Any
// role may set the session setting: its value is signed (a value the
// capture did not make counts as none), so a role can only set the count
// back, and every counted event is sent (those not replicated as a mark,
// with no text) with the string's Key (backend pid, timestamp, text
// hash), so the applier sees a number repeat and stops
// (apply/internal/engine/ddl_source.go, DDLString).
//
// Signed. pg_logical_emit_message is open to every role, so anyone could
// emit a message with Prefix. The capture signs each message with a key
// only its owner can read (walapply_ddl.secret, made at install from
// pg_strong_random): the content is the hex SHA-256 of key || SHA-256(key
// || body), then the body (JSON), which holds the (32-bit) xid of its
// transaction. The applier asks the source (walapply_ddl.verify, open to
// every role, answers yes or no) before it runs a statement, and skips,
// with a warning, what the capture did not sign and what names another
// transaction than the one it came in (a genuine message copied into a
// transaction of one's own). A role that can run SQL as the capture's
// owner can sign too.
//
// The key is a materialized view, not a table: a whole-database pg_dump
// by a role that is no superuser (a common backup setup) must be able to
// read every table, and fails on one it may not read, but it reads no
// materialized view's rows. A row written by the capture for each
// statement (readable by all, checked by xid) would serve too, but it is
// invisible to the applier while its transaction is prepared (two-phase)
// or still streaming, and needs pruning; the signature needs neither.
//
// Versioned. The schema walapply_ddl holds the functions; walapply_ddl.
// version() returns Version. Install creates or replaces everything in
// one transaction, so installing twice is a no-op and an older version is
// upgraded in place; Remove drops the event triggers and the schema.
package ddl

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Version is the version of the capture Install installs.
const Version = 2

// Prefix is the logical message prefix of captured DDL.
const Prefix = "walapply.ddl"

// Schema is the source schema that holds the capture.
const Schema = "walapply_ddl"

// Event trigger names (event triggers are per database, not per schema).
const (
	triggerEnd  = "walapply_ddl_command_end"
	triggerDrop = "walapply_ddl_sql_drop"
)

// tableOf is a SQL expression naming the table an object of the ddl
// commands belongs to, as a jsonb [schema, name, relkind, oid, parent's
// schema, parent's name] (the parent of a partition, else nulls), or NULL.
const tableOf = `(SELECT jsonb_build_array(n.nspname, r.relname, r.relkind::text, r.oid::text, pn.nspname, p.relname)
	FROM pg_class r JOIN pg_namespace n ON n.oid = r.relnamespace
	LEFT JOIN pg_inherits h ON h.inhrelid = r.oid AND r.relispartition
	LEFT JOIN pg_class p ON p.oid = h.inhparent LEFT JOIN pg_namespace pn ON pn.oid = p.relnamespace
	WHERE r.oid = CASE c.classid
		WHEN 'pg_class'::regclass THEN COALESCE((SELECT i.indrelid FROM pg_index i WHERE i.indexrelid = c.objid), c.objid)
		WHEN 'pg_constraint'::regclass THEN (SELECT x.conrelid FROM pg_constraint x WHERE x.oid = c.objid)
		WHEN 'pg_trigger'::regclass THEN (SELECT x.tgrelid FROM pg_trigger x WHERE x.oid = c.objid)
		WHEN 'pg_attrdef'::regclass THEN (SELECT x.adrelid FROM pg_attrdef x WHERE x.oid = c.objid)
		WHEN 'pg_rewrite'::regclass THEN (SELECT x.ev_class FROM pg_rewrite x WHERE x.oid = c.objid)
		WHEN 'pg_policy'::regclass THEN (SELECT x.polrelid FROM pg_policy x WHERE x.oid = c.objid)
		WHEN 'pg_statistic_ext'::regclass THEN (SELECT x.stxrelid FROM pg_statistic_ext x WHERE x.oid = c.objid)
		END)`

// installSQL creates or replaces the capture; every statement is
// idempotent.
var installSQL = []string{
	`CREATE SCHEMA IF NOT EXISTS walapply_ddl`,
	`REVOKE ALL ON SCHEMA walapply_ddl FROM PUBLIC`,
	`GRANT USAGE ON SCHEMA walapply_ddl TO PUBLIC`,
	`CREATE OR REPLACE FUNCTION walapply_ddl.version() RETURNS integer LANGUAGE sql IMMUTABLE AS 'SELECT ` + strconv.Itoa(Version) + `'`,
	`COMMENT ON SCHEMA walapply_ddl IS 'walapply DDL capture, version ` + strconv.Itoa(Version) + ` (walapply ddl install / remove)'`,
	// Version 1 kept the key in a table, which a pg_dump by any role
	// but its owner cannot read (and so fails): the upgrade drops it.
	`DO $d$ BEGIN
	IF EXISTS (SELECT FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'walapply_ddl' AND c.relname = 'secret' AND c.relkind <> 'm') THEN
		DROP TABLE walapply_ddl.secret;
	END IF;
END $d$`,
	// 244 bits from pg_strong_random (gen_random_uuid, core since 13),
	// materialized once: the definition shows only how it was made, and
	// pg_dump reads no materialized view's rows (it restores them with
	// REFRESH, which makes a new key). Kept when installed again, so
	// messages in flight stay valid.
	`CREATE MATERIALIZED VIEW IF NOT EXISTS walapply_ddl.secret AS
	SELECT sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text, 'UTF8')) AS key`,
	`REVOKE ALL ON TABLE walapply_ddl.secret FROM PUBLIC`,
	`CREATE OR REPLACE FUNCTION walapply_ddl.sign(body text) RETURNS text
	LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
	SELECT encode(sha256(s.key || sha256(s.key || convert_to(body, 'UTF8'))), 'hex') FROM walapply_ddl.secret s LIMIT 1
$f$`,
	`REVOKE ALL ON FUNCTION walapply_ddl.sign(text) FROM PUBLIC`,
	`CREATE OR REPLACE FUNCTION walapply_ddl.verify(body text, sig text) RETURNS boolean
	LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
	SELECT walapply_ddl.sign(body) = sig
$f$`,
	`GRANT EXECUTE ON FUNCTION walapply_ddl.verify(text, text) TO PUBLIC`,
	`CREATE OR REPLACE FUNCTION walapply_ddl.emit(body text) RETURNS void
	LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
	SELECT pg_logical_emit_message(true, '` + Prefix + `', walapply_ddl.sign(body) || body)
$f$`,
	`REVOKE ALL ON FUNCTION walapply_ddl.emit(text) FROM PUBLIC`,
	// Version 1's capture took no command tag.
	`DROP FUNCTION IF EXISTS walapply_ddl.capture(text, text, text)`,
	`CREATE OR REPLACE FUNCTION walapply_ddl.capture(kind text, path text, role text, tag text) RETURNS void
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
DECLARE
	objs jsonb;
	q text := current_query();
	key text := pg_backend_pid()::text || ' ' || statement_timestamp()::text || ' ' || md5(q);
	seq integer := 0;
	prev text := current_setting('walapply_ddl.seq', true);
	p text := split_part(prev, '|', 2);
	top_xid bigint := txid_current() % 4294967296; -- as pgoutput's Begin says it
	stack text;
BEGIN
	IF kind = 'drop' THEN
		SELECT COALESCE(jsonb_agg(jsonb_build_object('type', d.object_type, 'schema', d.schema_name,
			'name', d.object_name, 'identity', d.object_identity, 'names', to_jsonb(d.address_names),
			'temp', d.is_temporary)), '[]') INTO objs
		FROM pg_event_trigger_dropped_objects() d WHERE NOT d.is_temporary;
		IF objs = '[]' THEN RETURN; END IF;
		PERFORM set_config('walapply_ddl.dropped', key, true);
		PERFORM walapply_ddl.emit(jsonb_build_object('v', ` + strconv.Itoa(Version) + `,
			'kind', 'drop', 'xid', top_xid, 'objects', objs)::text);
		RETURN;
	END IF;
	IF tag = 'REINDEX' THEN
		RETURN; -- (fires from 17 on) maintenance, not a schema change
	END IF;
	-- Run by a statement of the client's query string, or from inside
	-- a function or DO block: frames below the event trigger's own (its
	-- line names the function; the rest of it may be translated)?
	GET DIAGNOSTICS stack = PG_CONTEXT;
	IF stack !~ E'on_command_end\\(\\)[^\\n]*\\n' THEN
		-- Counted for every statement of the string that fires, in a
		-- session setting (a COMMIT in the string keeps it), signed, as
		-- any role may set it: a value not made here counts as none.
		seq := 1;
		IF p ~ '^[0-9]{1,9}$' AND prev = key || '|' || p || '|' || walapply_ddl.sign(key || '|' || p) THEN
			seq := p::integer + 1;
		END IF;
		PERFORM set_config('walapply_ddl.seq', key || '|' || seq || '|' || walapply_ddl.sign(key || '|' || seq), false);
	END IF;
	SELECT COALESCE(jsonb_agg(jsonb_build_object('type', c.object_type, 'schema', c.schema_name,
		'identity', c.object_identity, 'tag', c.command_tag, 'table', ` + tableOf + `)), '[]') INTO objs
	FROM pg_event_trigger_ddl_commands() c WHERE NOT c.in_extension;
	IF objs <> '[]' AND NOT EXISTS (SELECT FROM jsonb_array_elements(objs) e
			WHERE COALESCE(e->>'schema', '') NOT LIKE 'pg\_temp%')
		OR objs = '[]' AND current_setting('walapply_ddl.dropped', true) IS DISTINCT FROM key THEN
		-- Temporary objects only, or nothing created, altered or
		-- dropped: never replicated, only counted (a mark, without text).
		IF seq > 0 THEN
			PERFORM walapply_ddl.emit(jsonb_build_object('v', ` + strconv.Itoa(Version) + `,
				'kind', 'command', 'xid', top_xid, 'key', key, 'seq', seq, 'tag', tag, 'mark', true)::text);
		END IF;
		RETURN;
	END IF;
	PERFORM set_config('walapply_ddl.dropped', '', true);
	PERFORM walapply_ddl.emit(jsonb_build_object('v', ` + strconv.Itoa(Version) + `,
		'kind', 'command', 'xid', top_xid, 'key', key, 'seq', seq, 'tag', tag, 'query', q, 'search_path', path, 'role', role,
		'objects', objs)::text);
END
$f$`,
	`REVOKE ALL ON FUNCTION walapply_ddl.capture(text, text, text, text) FROM PUBLIC`,
	`GRANT EXECUTE ON FUNCTION walapply_ddl.capture(text, text, text, text) TO PUBLIC`,
	`CREATE OR REPLACE FUNCTION walapply_ddl.on_command_end() RETURNS event_trigger LANGUAGE plpgsql AS $f$
BEGIN
	PERFORM walapply_ddl.capture('command', pg_catalog.current_setting('search_path'), current_user::text, TG_TAG);
END
$f$`,
	`CREATE OR REPLACE FUNCTION walapply_ddl.on_sql_drop() RETURNS event_trigger LANGUAGE plpgsql AS $f$
BEGIN
	PERFORM walapply_ddl.capture('drop', pg_catalog.current_setting('search_path'), current_user::text, TG_TAG);
END
$f$`,
}

// Install creates or upgrades the capture on the source conn is connected
// to, in one transaction: installing twice is a no-op. It needs a
// superuser (event triggers) that may emit logical messages.
func Install(ctx context.Context, conn *pgx.Conn) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, q := range installSQL {
			if _, err := tx.Exec(ctx, q); err != nil {
				return fmt.Errorf("installing the DDL capture: %w", err)
			}
		}
		for _, t := range []struct{ name, event, fn string }{
			{triggerEnd, "ddl_command_end", "walapply_ddl.on_command_end"},
			{triggerDrop, "sql_drop", "walapply_ddl.on_sql_drop"},
		} {
			var exists bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_event_trigger WHERE evtname = $1)`, t.name).Scan(&exists); err != nil {
				return fmt.Errorf("installing the DDL capture: %w", err)
			}
			if exists {
				continue
			}
			q := "CREATE EVENT TRIGGER " + pgx.Identifier{t.name}.Sanitize() + " ON " + t.event + " EXECUTE FUNCTION " + t.fn + "()"
			if _, err := tx.Exec(ctx, q); err != nil {
				return fmt.Errorf("installing the DDL capture (%s): %w", t.name, err)
			}
		}
		return nil
	})
}

// Remove drops the capture: both event triggers and the walapply_ddl
// schema. Removing what is not installed is a no-op.
func Remove(ctx context.Context, conn *pgx.Conn) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, q := range []string{
			"DROP EVENT TRIGGER IF EXISTS " + triggerEnd,
			"DROP EVENT TRIGGER IF EXISTS " + triggerDrop,
			"DROP SCHEMA IF EXISTS walapply_ddl CASCADE",
		} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return fmt.Errorf("removing the DDL capture: %w", err)
			}
		}
		return nil
	})
}

// ErrNotInstalled: the capture is missing, or a part of it is.
var ErrNotInstalled = errors.New("the DDL capture is not installed on the source")

// InstalledSQL returns the version of the installed capture as one row
// and column (0 when it is missing or incomplete: both event triggers must
// exist and be enabled). It is plain SQL without parameters, so that a
// replication connection can run it.
const InstalledSQL = `SELECT CASE WHEN (SELECT count(*) FROM pg_catalog.pg_event_trigger
	WHERE evtname IN ('` + triggerEnd + `', '` + triggerDrop + `') AND evtenabled <> 'D') = 2
	AND pg_catalog.to_regprocedure('walapply_ddl.capture(text,text,text,text)') IS NOT NULL
	THEN COALESCE((SELECT pg_catalog.obj_description(oid, 'pg_namespace') FROM pg_catalog.pg_namespace WHERE nspname = 'walapply_ddl'), '') ELSE '' END`

// CheckInstalled reads InstalledSQL through pg and says whether the
// capture of this Version is there.
func CheckInstalled(ctx context.Context, pg *pgconn.PgConn) error {
	rs, err := pg.Exec(ctx, InstalledSQL).ReadAll()
	if err != nil {
		return fmt.Errorf("looking for the DDL capture on the source: %w", err)
	}
	comment := ""
	if len(rs) == 1 && len(rs[0].Rows) == 1 && len(rs[0].Rows[0]) == 1 {
		comment = string(rs[0].Rows[0][0])
	}
	if comment == "" {
		return fmt.Errorf("%w: run `walapply ddl install --source URL` first", ErrNotInstalled)
	}
	if want := "version " + strconv.Itoa(Version) + " "; !strings.Contains(comment, want) {
		return fmt.Errorf("%w in this version (%q, want version %d): run `walapply ddl install --source URL` to upgrade it", ErrNotInstalled, comment, Version)
	}
	return nil
}
