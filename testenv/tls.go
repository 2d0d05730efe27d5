package testenv

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TLSOptions turns on TLS for a cluster (Options.TLS).
//
// TLS for throwaway clusters. Options.TLS makes a certificate authority of
// the cluster's own (a fresh ECDSA key, valid for a day), a server
// certificate signed by it, and turns on ssl with them; ClientCert issues
// client certificates from the same authority for `cert` authentication.
// Everything lives in the cluster's directory (tls/) and goes with it on
// Close. The authority's key stays readable by the test process only; the
// server's key belongs to the server user with mode 0600, as PostgreSQL
// demands.
//
// Authentication stays what Options.HBA says: TLS only adds the hostssl
// lines' transport. For example
//
//	HBA: []string{
//		"hostssl all alice 127.0.0.1/32 cert",
//		"hostssl all,replication bob 127.0.0.1/32 scram-sha-256",
//		"hostnossl all alice,bob 127.0.0.1/32 reject",
//	}
//
// makes alice log in with a client certificate whose CN is "alice", bob with
// his password over TLS, and neither of them without TLS; every other user
// (postgres included) is still trusted with or without TLS.
type TLSOptions struct {
	// ServerNames are the DNS names and IP addresses the server
	// certificate is valid for. Empty means 127.0.0.1, the one address the
	// server listens on, so that sslmode=verify-full succeeds with the
	// host of ConnString and TLSConnString.
	ServerNames []string
}

// TLSFiles are the PEM files of a cluster's TLS setup.
type TLSFiles struct {
	Dir        string // the directory holding them
	CACert     string // the cluster's certificate authority: ssl_ca_file, and sslrootcert for clients
	ServerCert string // ssl_cert_file
	ServerKey  string // ssl_key_file
}

// ClientCert is a client certificate signed by a cluster's authority and its
// key: sslcert and sslkey for a client.
type ClientCert struct {
	Cert, Key string
}

// ErrNoTLS is returned by the TLS methods of a cluster started without
// Options.TLS.
var ErrNoTLS = errors.New("testenv: the cluster was started without Options.TLS")

// certValidity is how long the throwaway certificates are valid; a test
// cluster does not live that long. They start an hour in the past, so that
// a slightly slow clock elsewhere does not reject them.
const certValidity = 24 * time.Hour

func (c *Cluster) tlsFiles() TLSFiles {
	dir := filepath.Join(c.dir, "tls")
	return TLSFiles{
		Dir:        dir,
		CACert:     filepath.Join(dir, "ca.crt"),
		ServerCert: filepath.Join(dir, "server.crt"),
		ServerKey:  filepath.Join(dir, "server.key"),
	}
}

func (c *Cluster) caKeyPath() string { return filepath.Join(c.dir, "tls", "ca.key") }

// TLS returns the cluster's TLS files; ok is false if it was started
// without Options.TLS.
func (c *Cluster) TLS() (files TLSFiles, ok bool) {
	f := c.tlsFiles()
	if _, err := os.Stat(f.CACert); err != nil {
		return TLSFiles{}, false
	}
	return f, true
}

// setupTLS writes the authority and the server certificate and returns
// settings with the ssl parameters added (the caller's own values of them
// win).
func (c *Cluster) setupTLS(o *TLSOptions, settings map[string]string) (map[string]string, error) {
	f := c.tlsFiles()
	if err := os.Mkdir(f.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("testenv: creating the TLS directory: %w", err)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("testenv: generating the CA key: %w", err)
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber: randomSerial(),
		// A name of its own: a client handed another cluster's authority
		// then reports an unknown authority, not a failed signature.
		Subject:               pkix.Name{CommonName: fmt.Sprintf("walapply testenv CA %x (PostgreSQL %d)", randomSerial().Uint64(), c.version)},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("testenv: creating the CA certificate: %w", err)
	}
	if err := writePEM(f.CACert, "CERTIFICATE", der, 0o644, nil); err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(caKey)
	if err != nil {
		return nil, fmt.Errorf("testenv: encoding the CA key: %w", err)
	}
	// The authority's key is the test's: the server has no use for it.
	if err := writePEM(c.caKeyPath(), "PRIVATE KEY", keyDER, 0o600, nil); err != nil {
		return nil, err
	}
	names := o.ServerNames
	if len(names) == 0 {
		names = []string{"127.0.0.1"}
	}
	if _, err := c.writeServerCert(names); err != nil {
		return nil, err
	}
	out := maps.Clone(settings)
	if out == nil {
		out = map[string]string{}
	}
	for k, v := range map[string]string{
		"ssl":           "on",
		"ssl_cert_file": f.ServerCert,
		"ssl_key_file":  f.ServerKey,
		"ssl_ca_file":   f.CACert,
	} {
		if _, set := out[k]; !set {
			out[k] = v
		}
	}
	return out, nil
}

// loadCA reads the cluster's authority back.
func (c *Cluster) loadCA() (*x509.Certificate, *ecdsa.PrivateKey, error) {
	f, ok := c.TLS()
	if !ok {
		return nil, nil, ErrNoTLS
	}
	certPEM, err := os.ReadFile(f.CACert)
	if err != nil {
		return nil, nil, fmt.Errorf("testenv: %w", err)
	}
	keyPEM, err := os.ReadFile(c.caKeyPath())
	if err != nil {
		return nil, nil, fmt.Errorf("testenv: %w", err)
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, errors.New("testenv: the cluster's CA files are not PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("testenv: parsing the CA certificate: %w", err)
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("testenv: parsing the CA key: %w", err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, nil, errors.New("testenv: the CA key is not an ECDSA key")
	}
	return cert, key, nil
}

// issue signs a certificate for tmpl's subject with the cluster's authority
// and returns its DER and the new key's PKCS #8 DER.
func (c *Cluster) issue(tmpl *x509.Certificate) (certDER, keyDER []byte, err error) {
	ca, caKey, err := c.loadCA()
	if err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("testenv: generating a key: %w", err)
	}
	now := time.Now()
	tmpl.SerialNumber = randomSerial()
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(certValidity)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid = true
	certDER, err = x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("testenv: signing a certificate for %q: %w", tmpl.Subject.CommonName, err)
	}
	keyDER, err = x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("testenv: encoding a key: %w", err)
	}
	return certDER, keyDER, nil
}

// writeServerCert issues a server certificate valid for names and installs
// it (key first, each file replaced atomically, so a reload never sees half
// a file). It returns the certificate's DER.
func (c *Cluster) writeServerCert(names []string) ([]byte, error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: names[0]},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	certDER, keyDER, err := c.issue(tmpl)
	if err != nil {
		return nil, err
	}
	f := c.tlsFiles()
	// PostgreSQL refuses a key that others may read, or that belongs to
	// anyone but the server user (or root with mode 0640).
	if err := writePEM(f.ServerKey, "PRIVATE KEY", keyDER, 0o600, c.user); err != nil {
		return nil, err
	}
	if err := writePEM(f.ServerCert, "CERTIFICATE", certDER, 0o644, c.user); err != nil {
		return nil, err
	}
	return certDER, nil
}

// ClientCert issues a client certificate for user (its CN, which `cert`
// authentication maps to the user name) and writes it and its key into the
// cluster's TLS directory. The files belong to the test process, mode 0600.
func (c *Cluster) ClientCert(user string) (ClientCert, error) {
	certDER, keyDER, err := c.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: user},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return ClientCert{}, err
	}
	// The user name may hold anything; the file name holds a digest of it.
	sum := sha256.Sum256([]byte(user))
	base := filepath.Join(c.tlsFiles().Dir, "client-"+hex.EncodeToString(sum[:8]))
	cc := ClientCert{Cert: base + ".crt", Key: base + ".key"}
	if err := writePEM(cc.Key, "PRIVATE KEY", keyDER, 0o600, nil); err != nil {
		return ClientCert{}, err
	}
	if err := writePEM(cc.Cert, "CERTIFICATE", certDER, 0o600, nil); err != nil {
		return ClientCert{}, err
	}
	return cc, nil
}

// ReissueServerCert replaces the server certificate with one valid for
// names (DNS names or IP addresses), signed by the same authority, reloads
// the server's configuration and returns once new connections get the new
// certificate. Tests use it to make sslmode=verify-full fail on the host
// name while everything else stays valid.
func (c *Cluster) ReissueServerCert(ctx context.Context, names ...string) error {
	if len(names) == 0 {
		return errors.New("testenv: ReissueServerCert needs at least one name")
	}
	der, err := c.writeServerCert(names)
	if err != nil {
		return err
	}
	if err := c.Exec(ctx, "SELECT pg_catalog.pg_reload_conf()"); err != nil {
		return err
	}
	// The postmaster reloads on SIGHUP, asynchronously: poll until a new
	// connection presents the new certificate.
	cfg, err := pgconn.ParseConfig(c.connURL("postgres", "sslmode=require"))
	if err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	for {
		var seen []byte
		cfg.TLSConfig.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) > 0 {
				seen = raw[0]
			}
			return nil
		}
		conn, err := pgconn.ConnectConfig(ctx, cfg)
		if err == nil {
			_ = conn.Close(ctx)
		}
		if string(seen) == string(der) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testenv: waiting for PostgreSQL %d to load its new server certificate (last connection: %v): %w", c.version, err, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TLSConnString returns a URL connecting as user to database db ("postgres"
// if empty) with the given sslmode, trusting the cluster's authority
// (sslrootcert) and, with client non-nil, presenting its certificate
// (sslcert, sslkey). A cluster without TLS gets no sslrootcert.
func (c *Cluster) TLSConnString(db, user, sslmode string, client *ClientCert) string {
	q := url.Values{}
	q.Set("sslmode", sslmode)
	if f, ok := c.TLS(); ok {
		q.Set("sslrootcert", f.CACert)
	}
	if client != nil {
		q.Set("sslcert", client.Cert)
		q.Set("sslkey", client.Key)
	}
	if db == "" {
		db = "postgres"
	}
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(user),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path:     "/" + db,
		RawPath:  "/" + url.PathEscape(db),
		RawQuery: q.Encode(),
	}
	return u.String()
}

// writePEM writes one PEM block to path through a temporary file renamed
// into place, with mode perm and, if owner is not nil, given to owner.
func writePEM(path, blockType string, der []byte, perm os.FileMode, owner *serverUser) error {
	tmp := path + ".tmp"
	data := pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der})
	if err := os.WriteFile(tmp, data, perm); err != nil {
		return fmt.Errorf("testenv: writing %s: %w", path, err)
	}
	// WriteFile's mode is subject to the umask and ignored for an
	// existing file.
	if err := os.Chmod(tmp, perm); err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	if err := owner.chown(tmp); err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	return nil
}

// randomSerial returns a random 128-bit certificate serial number.
func randomSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}
