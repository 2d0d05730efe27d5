package apply_test

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/internal/ddl"
	"github.com/walapply/walapply/internal/testutil"
	"github.com/walapply/walapply/testenv"
)

// installDDL installs the DDL capture on the source.
func (h *harness) installDDL() {
	h.t.Helper()
	conn := h.conn(true)
	if err := ddl.Install(h.ctx, conn); err != nil {
		h.t.Fatal(err)
	}
}

// tableSchemaSQL describes tables (schema.name pairs in the IN list) from
// the catalog: columns in order with type, NOT NULL and default, then
// constraints and indexes by name.
const tableSchemaSQL = `SELECT c.oid::regclass::text || ' col ' || a.attnum || ' ' || quote_ident(a.attname) || ' ' || format_type(a.atttypid, a.atttypmod)
	|| CASE WHEN a.attnotnull THEN ' not null' ELSE '' END || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '')
FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
WHERE c.oid = ANY ($1::regclass[]) AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL SELECT conrelid::regclass::text || ' constraint ' || quote_ident(conname) || ' ' || pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = ANY ($1::regclass[])
UNION ALL SELECT indrelid::regclass::text || ' index ' || pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = ANY ($1::regclass[])`

// compareSchemas checks that tables have the same definition on both
// sides: with pg_dump --schema-only on 15 (the pg_dump here dumps 15
// servers only), through the catalog on the others.
func (h *harness) compareSchemas(tables ...string) {
	h.t.Helper()
	if h.pair.Source.Version() == 15 {
		src, dst := h.schemaDump(h.pair.Source, tables), h.schemaDump(h.pair.Target, tables)
		if src != dst {
			h.t.Errorf("pg_dump --schema-only differs:\n--- source\n%s\n--- target\n%s", src, dst)
		} else {
			h.t.Logf("pg_dump --schema-only of %v equal on both sides (%d lines)", tables, strings.Count(src, "\n"))
		}
		return
	}
	var src, dst []string
	for _, c := range []*testenv.Cluster{h.pair.Source, h.pair.Target} {
		conn, err := c.Connect(h.ctx, "postgres")
		if err != nil {
			h.t.Fatal(err)
		}
		rows, err := conn.Query(h.ctx, tableSchemaSQL, tables)
		if err != nil {
			h.t.Fatal(err)
		}
		var got []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				h.t.Fatal(err)
			}
			got = append(got, s)
		}
		rows.Close()
		conn.Close(h.ctx)
		if c == h.pair.Source {
			src = got
		} else {
			dst = got
		}
	}
	slices.Sort(src)
	slices.Sort(dst)
	if strings.Join(src, "\n") != strings.Join(dst, "\n") {
		h.t.Errorf("table definitions differ:\n%s", diffRows(src, dst))
	} else {
		h.t.Logf("catalog definitions of %v equal on both sides (%d lines)", tables, len(src))
	}
}

// schemaDump is pg_dump --schema-only of tables, without its comments and
// \restrict lines.
func (h *harness) schemaDump(c *testenv.Cluster, tables []string) string {
	h.t.Helper()
	bin, err := testenv.Tool(15, "pg_dump")
	if err != nil {
		h.t.Fatal(err)
	}
	args := []string{"--schema-only", "--no-owner", "--no-privileges", "-d", c.ConnString("postgres")}
	for _, t := range tables {
		args = append(args, "-t", t)
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		h.t.Fatalf("pg_dump: %v\n%s", err, out)
	}
	var keep []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "--") || strings.HasPrefix(l, `\restrict`) || strings.HasPrefix(l, `\unrestrict`) || l == "" {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

// hasColumn reports whether a table has a column on a cluster.
func (h *harness) hasColumn(source bool, table, column string) bool {
	h.t.Helper()
	return h.scalar(source, "SELECT count(*)::text FROM pg_attribute WHERE attrelid = $1::regclass AND attname = $2 AND NOT attisdropped", table, column) == "1"
}

// requireDDLVersions skips before 15 (two-phase decoding and FOR TABLES
// IN SCHEMA; messages need 14).
func requireDDLVersions(t *testing.T, version int) {
	if version < 15 {
		t.Skipf("PostgreSQL %d: the DDL tests run on 15 and later", version)
	}
}

// ddlConfig is h.config with --ddl, streaming in mode ("off" or "on") and
// the log kept.
func (h *harness) ddlConfig(slot, mode string, pubs ...string) (apply.Config, *testutil.LogBuffer) {
	cfg := h.config(slot, pubs...)
	cfg.DDL, cfg.Streaming = true, mode
	cfg.SpillDir = filepath.Join(h.t.TempDir(), "spill")
	logs := &testutil.LogBuffer{}
	cfg.Logger = zerolog.New(zerolog.MultiLevelWriter(zerolog.NewTestWriter(h.t), logs)).Level(zerolog.DebugLevel)
	return cfg, logs
}
