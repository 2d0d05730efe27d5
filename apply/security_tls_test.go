package apply_test

import (
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/testenv"
)

// tlsOnlyHBA lets user in only over TLS with a client certificate.
func tlsOnlyHBA(user string) []string {
	return []string{
		"hostssl all " + user + " 127.0.0.1/32 cert",
		"hostnossl all " + user + " 127.0.0.1/32 reject",
	}
}

// TestTLS: walapply connects to source and target as the connection strings
// say (sslmode, sslrootcert, sslcert, sslkey), replicates over verified TLS
// with client certificates, and a certificate that does not verify stops it
// with a clear, permanent error that moves nothing; fixing the connection
// string resumes.
func TestTLS(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := secHarness(t,
			testenv.Options{Version: version, TLS: &testenv.TLSOptions{}, HBA: tlsOnlyHBA("walsrc")},
			testenv.Options{Version: version, TLS: &testenv.TLSOptions{}, HBA: tlsOnlyHBA("waltgt")})
		src, dst := h.pair.Source, h.pair.Target
		// Superusers, so that this test is about TLS only (the least
		// privileges have a test of their own).
		h.source(`CREATE ROLE walsrc LOGIN SUPERUSER`, `CREATE TABLE t (id int PRIMARY KEY, v text)`, `CREATE PUBLICATION pub FOR TABLE t`)
		h.target(`CREATE ROLE waltgt LOGIN SUPERUSER`, `CREATE TABLE t (id int PRIMARY KEY, v text)`)
		srcCert, err := src.ClientCert("walsrc")
		if err != nil {
			t.Fatal(err)
		}
		dstCert, err := dst.ClientCert("waltgt")
		if err != nil {
			t.Fatal(err)
		}
		h.createSlot("tls")
		cfg := h.secConfig("tls", "pub", nil)
		cfg.Source = src.TLSConnString("", "walsrc", "verify-full", &srcCert)
		cfg.Target = dst.TLSConnString("", "waltgt", "verify-full", &dstCert)

		// 1. verify-full with client certificates on both sides.
		stop := h.runApplier(cfg)
		h.source(`INSERT INTO t SELECT g, 'row ' || g FROM generate_series(1, 100) g`)
		h.waitCaughtUp("tls", time.Minute)
		// The walsender and both target sessions are walapply's, over TLS.
		if got := h.rows(src, `SELECT r.usename || ' ' || s.ssl FROM pg_stat_replication r JOIN pg_stat_ssl s ON s.pid = r.pid`); strings.Join(got, ",") != "walsrc true" {
			t.Errorf("source walsenders (user, ssl): %q, want [walsrc true]", got)
		}
		if got := h.rows(dst, `SELECT a.usename || ' ' || s.ssl FROM pg_stat_activity a JOIN pg_stat_ssl s ON s.pid = a.pid WHERE a.application_name LIKE 'walapply tls %'`); strings.Join(got, ",") != "waltgt true,waltgt true" {
			t.Errorf("target sessions (user, ssl): %q, want two of [waltgt true]", got)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		h.compare(tableRows("t", ""))

		// 2. The target's certificate names another host: verify-full
		// fails at once and for good; nothing moves.
		if err := dst.ReissueServerCert(h.ctx, "db.walapply.invalid"); err != nil {
			t.Fatal(err)
		}
		h.source(`INSERT INTO t VALUES (101, 'after the target''s new certificate')`)
		before := h.secOrigin("tls")
		err = secRun(t, cfg)
		t.Logf("target verify-full on a wrong host name: %v", err)
		if err == nil || !strings.Contains(err.Error(), "x509") || !strings.Contains(err.Error(), "target") {
			t.Fatalf("want an x509 error about the target, got %v", err)
		}
		if apply.IsTransient(err) {
			t.Error("a TLS verification failure is reported as transient (it would be retried forever)")
		}
		if after := h.secOrigin("tls"); after != before {
			t.Errorf("origin moved from %s to %s", before, after)
		}
		h.expect("SELECT count(*)::text FROM t", "100")

		// verify-ca does not check the host name: the user's fix resumes.
		cfg.Target = dst.TLSConnString("", "waltgt", "verify-ca", &dstCert)

		// 3. The same on the source.
		if err := src.ReissueServerCert(h.ctx, "db.walapply.invalid"); err != nil {
			t.Fatal(err)
		}
		err = secRun(t, cfg)
		t.Logf("source verify-full on a wrong host name: %v", err)
		if err == nil || !strings.Contains(err.Error(), "x509") || !strings.Contains(err.Error(), "source") || apply.IsTransient(err) {
			t.Fatalf("want a permanent x509 error about the source, got %v (transient: %v)", err, apply.IsTransient(err))
		}

		// 4. An sslrootcert that did not sign the server's certificate
		// (the target's authority, for the source).
		cfg.Source = secSetParam(src.TLSConnString("", "walsrc", "verify-ca", &srcCert), "sslrootcert", mustTLS(t, dst).CACert)
		err = secRun(t, cfg)
		t.Logf("source with another authority: %v", err)
		if err == nil || !strings.Contains(err.Error(), "unknown authority") || apply.IsTransient(err) {
			t.Fatalf("want a permanent unknown-authority error, got %v", err)
		}

		// 5. No client certificate where the server demands one: the
		// server refuses (pg_hba.conf), permanently.
		cfg.Source = src.TLSConnString("", "walsrc", "verify-ca", nil)
		err = secRun(t, cfg)
		t.Logf("source without a client certificate: %v", err)
		if err == nil || !strings.Contains(err.Error(), "28000") || apply.IsTransient(err) {
			t.Fatalf("want a permanent SQLSTATE 28000 error, got %v", err)
		}

		// Fixed: verify-ca and the certificate; the pending row arrives.
		cfg.Source = src.TLSConnString("", "walsrc", "verify-ca", &srcCert)
		stop = h.runApplier(cfg)
		h.source(`INSERT INTO t VALUES (102, 'last')`)
		h.waitCaughtUp("tls", time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if n := h.compare(tableRows("t", "")); n != 102 {
			t.Errorf("%d rows, want 102", n)
		}
	})
}

// TestTLSRefusedByServer: sslmode=require against a server without TLS is
// a configuration error, not something to retry.
func TestTLSRefusedByServer(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 0, nil, nil)
	h.source(`CREATE TABLE t (id int PRIMARY KEY)`, `CREATE PUBLICATION pub FOR TABLE t`)
	cfg := h.secConfig("notls", "pub", nil)
	cfg.Target = strings.Replace(cfg.Target, "sslmode=disable", "sslmode=require", 1)
	err := secRun(t, cfg)
	t.Logf("sslmode=require without TLS on the server: %v", err)
	if err == nil || !strings.Contains(err.Error(), "refused TLS") || apply.IsTransient(err) {
		t.Fatalf("want a permanent error saying the server refused TLS, got %v", err)
	}
}

func mustTLS(t *testing.T, c *testenv.Cluster) testenv.TLSFiles {
	t.Helper()
	f, ok := c.TLS()
	if !ok {
		t.Fatal("cluster without TLS")
	}
	return f
}
