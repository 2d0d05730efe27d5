package testenv_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walapply/walapply/testenv"
)

// tlsHBA makes certuser log in only with a client certificate and pwuser
// only with a password, both only over TLS.
var tlsHBA = []string{
	"hostssl all certuser 127.0.0.1/32 cert",
	"hostssl all pwuser 127.0.0.1/32 scram-sha-256",
	"hostnossl all certuser,pwuser 127.0.0.1/32 reject",
}

// TestTLS: a cluster with Options.TLS takes verified TLS connections,
// authenticates client certificates, and fails verify-full (but not
// verify-ca) once its certificate names another host.
func TestTLS(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		ctx := testCtx(t)
		c := testenv.NewCluster(t, testenv.Options{Version: version, TLS: &testenv.TLSOptions{}, HBA: tlsHBA})
		files, ok := c.TLS()
		if !ok {
			t.Fatal("TLS() reports no TLS on a cluster started with Options.TLS")
		}
		if st, err := os.Stat(files.ServerKey); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("server key %s: mode %v, err %v; want 0600", files.ServerKey, st.Mode(), err)
		}
		if err := c.Exec(ctx, "CREATE ROLE certuser LOGIN REPLICATION"); err != nil {
			t.Fatal(err)
		}
		if err := c.Exec(ctx, "CREATE ROLE pwuser LOGIN PASSWORD 'tls-test-pw'"); err != nil {
			t.Fatal(err)
		}
		cert, err := c.ClientCert("certuser")
		if err != nil {
			t.Fatal(err)
		}

		// verify-full with a client certificate: TLS, as certuser.
		url := c.TLSConnString("", "certuser", "verify-full", &cert)
		if got := queryAs(t, ctx, url, "SELECT current_user || ' ' || ssl::text FROM pg_stat_ssl WHERE pid = pg_backend_pid()"); got != "certuser true" {
			t.Errorf("verify-full with a client certificate: got %q, want \"certuser true\"", got)
		}
		// ... also for a logical replication connection.
		rc, err := pgconn.Connect(ctx, url+"&replication=database")
		if err != nil {
			t.Fatalf("replication connection over TLS: %v", err)
		}
		if _, err := pglogrepl.IdentifySystem(ctx, rc); err != nil {
			t.Errorf("IDENTIFY_SYSTEM over TLS: %v", err)
		}
		rc.Close(ctx)

		// A password over TLS.
		pw := withPassword(t, c.TLSConnString("", "pwuser", "verify-full", nil), "tls-test-pw")
		if got := queryAs(t, ctx, pw, "SELECT current_user || ' ' || ssl::text FROM pg_stat_ssl WHERE pid = pg_backend_pid()"); got != "pwuser true" {
			t.Errorf("verify-full with a password: got %q", got)
		}

		// Refusals: no client certificate, no TLS, a client certificate for
		// another user.
		var pgErr *pgconn.PgError
		if _, err := pgx.Connect(ctx, c.TLSConnString("", "certuser", "verify-full", nil)); !errors.As(err, &pgErr) || pgErr.Code != "28000" {
			t.Errorf("certuser without a client certificate: want SQLSTATE 28000, got %v", err)
		}
		if _, err := pgx.Connect(ctx, c.TLSConnString("", "certuser", "disable", &cert)); !errors.As(err, &pgErr) || pgErr.Code != "28000" {
			t.Errorf("certuser without TLS: want SQLSTATE 28000 (rejected by pg_hba.conf), got %v", err)
		}
		other, err := c.ClientCert("someone_else")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pgx.Connect(ctx, c.TLSConnString("", "certuser", "verify-full", &other)); !errors.As(err, &pgErr) || pgErr.Code != "28000" {
			t.Errorf("certuser with someone else's certificate: want SQLSTATE 28000, got %v", err)
		}

		// Another authority: the server's certificate does not verify.
		wrongCA := strangerCA(t)
		u := c.TLSConnString("", "certuser", "verify-ca", &cert)
		u = replaceParam(t, u, "sslrootcert", wrongCA)
		var unknown x509.UnknownAuthorityError
		if _, err := pgx.Connect(ctx, u); !errors.As(err, &unknown) {
			t.Errorf("verify-ca against another authority: want x509.UnknownAuthorityError, got %v", err)
		}

		// A certificate for another host name: verify-full fails,
		// verify-ca still succeeds.
		if err := c.ReissueServerCert(ctx, "db.walapply.invalid"); err != nil {
			t.Fatal(err)
		}
		var hostErr x509.HostnameError
		_, err = pgx.Connect(ctx, c.TLSConnString("", "certuser", "verify-full", &cert))
		if !errors.As(err, &hostErr) {
			t.Errorf("verify-full against a certificate for db.walapply.invalid: want x509.HostnameError, got %v", err)
		} else {
			t.Logf("verify-full on a wrong host name: %v", err)
		}
		if got := queryAs(t, ctx, c.TLSConnString("", "certuser", "verify-ca", &cert), "SELECT current_user"); got != "certuser" {
			t.Errorf("verify-ca after reissuing: got %q", got)
		}
	})
}

// TestTLSOff: without Options.TLS there are no TLS files to hand out.
func TestTLSOff(t *testing.T) {
	c := testenv.NewCluster(t, testenv.Options{})
	if _, ok := c.TLS(); ok {
		t.Error("TLS() reports TLS on a cluster started without it")
	}
	if _, err := c.ClientCert("x"); !errors.Is(err, testenv.ErrNoTLS) {
		t.Errorf("ClientCert without TLS: want ErrNoTLS, got %v", err)
	}
	if got := queryString(t, c, "SHOW ssl"); got != "off" {
		t.Errorf("ssl = %s without Options.TLS", got)
	}
}

// queryAs runs a query returning one text value on a connection of its
// own to connString.
func queryAs(t *testing.T, ctx context.Context, connString, sql string) string {
	t.Helper()
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	defer conn.Close(ctx)
	var s string
	if err := conn.QueryRow(ctx, sql).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

func withPassword(t *testing.T, connString, password string) string {
	t.Helper()
	u, err := url.Parse(connString)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), password)
	return u.String()
}

func replaceParam(t *testing.T, connString, key, value string) string {
	t.Helper()
	u, err := url.Parse(connString)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// strangerCA writes a self-signed authority that signed nothing of the
// cluster's and returns its path.
func strangerCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "stranger CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "stranger.crt")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
