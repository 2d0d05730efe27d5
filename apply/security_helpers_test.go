package apply_test

import (
	"context"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/internal/testutil"
	"github.com/walapply/walapply/testenv"
)

// Helpers of the security_* and badinput_* tests (issue 8).

// secHarness starts a source and a target cluster with options of their
// own (TLS, HBA), which testenv.NewPair does not take.
func secHarness(t *testing.T, source, target testenv.Options) *harness {
	t.Helper()
	src := testenv.NewCluster(t, source)
	dst := testenv.NewCluster(t, target)
	return &harness{t: t, pair: &testenv.Pair{Source: src, Target: dst}, ctx: context.Background()}
}

// secConfig is h.config with a spill directory of the test's own and, if
// log is not nil, every log line at every level kept in log too.
func (h *harness) secConfig(slot, pub string, log *testutil.LogBuffer) apply.Config {
	cfg := h.config(slot, pub)
	cfg.SpillDir = filepath.Join(h.t.TempDir(), "spill")
	if log != nil {
		cfg.Logger = zerolog.New(zerolog.MultiLevelWriter(zerolog.NewTestWriter(h.t), log)).Level(zerolog.TraceLevel)
	}
	return cfg
}

// secRun runs the applier until it returns by itself, which only a
// permanent error makes it do; a run that is still going after a minute
// fails the test (it is retrying an error that should be permanent).
func secRun(t *testing.T, cfg apply.Config) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := apply.Run(ctx, cfg)
	if ctx.Err() != nil {
		t.Fatalf("the applier kept running (retrying?) instead of stopping with a permanent error; last result %v", err)
	}
	return err
}

// secOrigin returns the progress of applier name's origin on the target,
// "none" before it has any.
func (h *harness) secOrigin(name string) string {
	h.t.Helper()
	rows := h.rows(h.pair.Target, "SELECT COALESCE((SELECT pg_replication_origin_progress(roname, false)::text FROM pg_replication_origin WHERE roname = "+
		secLiteral("walapply_"+name)+"), 'none')")
	return rows[0]
}

// secLiteral quotes s as an SQL string literal (standard_conforming_strings on).
func secLiteral(s string) string {
	out := []byte{'\''}
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			out = append(out, '\'')
		}
		out = append(out, s[i])
	}
	return string(append(out, '\''))
}

// secIdent quotes one identifier.
func secIdent(name string) string { return pgx.Identifier{name}.Sanitize() }

// secQualified quotes schema.name.
func secQualified(schema, name string) string { return pgx.Identifier{schema, name}.Sanitize() }

// secUserURL returns c's URL for database postgres as user with password
// (none if empty), sslmode=disable.
func secUserURL(c *testenv.Cluster, user, password string) string {
	u, err := url.Parse(c.ConnString("postgres"))
	if err != nil {
		panic(err)
	}
	if password == "" {
		u.User = url.User(user)
	} else {
		u.User = url.UserPassword(user, password)
	}
	return u.String()
}

// secSetParam sets a query parameter of a connection URL.
func secSetParam(connURL, key, value string) string {
	u, err := url.Parse(connURL)
	if err != nil {
		panic(err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}
