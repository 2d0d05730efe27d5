package schema

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/internal/secret"
)

// PgDump is a pg_dump found and its major version.
//
// pg_dump is the tool that writes the schema for --schema: walapply
// generates no DDL of its own. It is found as Config.PgDump, on PATH, or in
// `pg_config --bindir`, and must be at least the source's major version (an
// older pg_dump cannot read a newer catalog, and refuses to).
//
// The source's password never reaches pg_dump's command line (which ps
// shows): it is taken out of the connection string given as --dbname and
// passed in the child's PGPASSWORD.
type PgDump struct {
	Path  string
	Major int
}

// ToolError is a pg_dump that cannot serve the source: none found, one
// that does not run or is not PostgreSQL's, one older than the source, or
// one that refuses the source's server version. Retrying cannot fix it:
// the operator installs the source's major version of pg_dump.
type ToolError struct{ Err error }

func (e *ToolError) Error() string { return e.Err.Error() }
func (e *ToolError) Unwrap() error { return e.Err }

// ErrConnString is wrapped by Dump's error when the source's connection
// string cannot be parsed (the error says why, without its password).
var ErrConnString = errors.New("source connection string")

var pgDumpVersion = regexp.MustCompile(`\(PostgreSQL\) (\d+)`)

// Find finds pg_dump (at path, or on PATH or by pg_config when path is
// empty) and checks it can dump a source of server_version_num version.
// Every error it returns is a *ToolError.
func Find(ctx context.Context, path string, version int) (PgDump, error) {
	if path == "" {
		if p, err := exec.LookPath("pg_dump"); err == nil {
			path = p
		} else if out, err := exec.CommandContext(ctx, "pg_config", "--bindir").Output(); err == nil {
			path = filepath.Join(strings.TrimSpace(string(out)), "pg_dump")
		}
	}
	srcMajor := version / 10000
	if path == "" {
		return PgDump{}, &ToolError{fmt.Errorf("--schema needs pg_dump, found neither on PATH nor by pg_config --bindir: install PostgreSQL %d's client programs (e.g. postgresql-client-%d) and pass --pg-dump PATH", srcMajor, srcMajor)}
	}
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return PgDump{}, &ToolError{fmt.Errorf("running %s --version for --schema: %w; pass --pg-dump with the path of PostgreSQL %d's pg_dump", path, err, srcMajor)}
	}
	m := pgDumpVersion.FindSubmatch(out)
	if m == nil {
		return PgDump{}, &ToolError{fmt.Errorf("%s --version printed %q, not a PostgreSQL pg_dump's version", path, strings.TrimSpace(string(out)))}
	}
	major, _ := strconv.Atoi(string(m[1]))
	if major < srcMajor {
		return PgDump{}, &ToolError{fmt.Errorf("%s is PostgreSQL %d's pg_dump, older than the source (PostgreSQL %d), and cannot dump its schema: install PostgreSQL %d's client programs (e.g. postgresql-client-%d) and pass --pg-dump PATH", path, major, srcMajor, srcMajor, srcMajor)}
	}
	return PgDump{Path: path, Major: major}, nil
}

// Dump runs pg_dump --schema-only for one section ("pre-data",
// "post-data") of the source that connection string source names, as
// application appName, with the given object selection switches
// (Pattern), and returns its script. Its error wraps ErrConnString when
// source does not parse, and is a *ToolError when pg_dump refuses the
// source's version; pg_dump's own message in it is scrubbed of source's
// password.
func (d PgDump) Dump(ctx context.Context, source, appName, section string, selection []string) (string, error) {
	dbname, password, err := withoutPassword(source)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrConnString, secret.Error(err, source))
	}
	args := append([]string{"--schema-only", "--section=" + section, "--no-owner", "--no-privileges", "--dbname=" + dbname}, selection...)
	cmd := exec.CommandContext(ctx, d.Path, args...)
	cmd.Env = append(os.Environ(), "PGAPPNAME="+appName)
	if password != "" {
		cmd.Env = append(cmd.Env, "PGPASSWORD="+password)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := secret.Scrub(strings.TrimSpace(stderr.String()), source)
		if strings.Contains(msg, "server version mismatch") || strings.Contains(msg, "aborting because of server version") {
			return "", &ToolError{fmt.Errorf("%s (PostgreSQL %d) refuses the source's server version: install the source's major version of pg_dump and pass --pg-dump PATH (pg_dump said: %s)", d.Path, d.Major, msg)}
		}
		return "", fmt.Errorf("running pg_dump --section=%s on the source: %v: %s", section, err, msg)
	}
	return stdout.String(), nil
}

// Pattern is pg_dump's -t/-n pattern matching exactly one name: in
// double quotes every pattern character is literal, a quote is doubled.
func Pattern(names ...string) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = `"` + strings.ReplaceAll(n, `"`, `""`) + `"`
	}
	return strings.Join(parts, ".")
}

// libpqKeywords are the connection settings pg_dump (libpq) knows; a
// connection string for walapply may hold others (pgx's, or server
// settings pgx sends at startup), which libpq would refuse.
var libpqKeywords = map[string]bool{}

func init() {
	for _, k := range strings.Fields(`host hostaddr port dbname user password passfile require_auth channel_binding
		connect_timeout client_encoding options application_name fallback_application_name keepalives
		keepalives_idle keepalives_interval keepalives_count tcp_user_timeout replication gssencmode sslmode
		sslnegotiation requiressl sslcompression sslcert sslkey sslkeylogfile sslpassword sslcertmode sslrootcert
		sslcrl sslcrldir sslsni requirepeer ssl_min_protocol_version ssl_max_protocol_version krbsrvname gsslib
		gssdelegation service target_session_attrs load_balance_hosts`) {
		libpqKeywords[k] = true
	}
}

// withoutPassword splits a connection string into one without its
// password (a URL's userinfo password and password= settings) and the
// password pgconn reads from it (also from PGPASSWORD or the passfile).
// Settings libpq does not know are left out too.
func withoutPassword(cs string) (string, string, error) {
	pc, err := pgconn.ParseConfig(cs)
	if err != nil {
		return "", "", err
	}
	if strings.HasPrefix(cs, "postgres://") || strings.HasPrefix(cs, "postgresql://") {
		u, err := url.Parse(cs)
		if err != nil {
			return "", "", err
		}
		if u.User != nil {
			u.User = url.User(u.User.Username())
		}
		q := u.Query()
		for k := range q {
			if !libpqKeywords[k] || k == "password" {
				q.Del(k)
			}
		}
		u.RawQuery = q.Encode()
		return u.String(), pc.Password, nil
	}
	var b strings.Builder
	for i := skipKV(cs, 0); i < len(cs); i = skipKV(cs, i) {
		eq := strings.IndexByte(cs[i:], '=')
		if eq < 0 {
			return "", "", errors.New("a setting without '='")
		}
		key := strings.TrimSpace(cs[i : i+eq])
		j := skipKV(cs, i+eq+1)
		var value strings.Builder
		quoted := j < len(cs) && cs[j] == '\''
		if quoted {
			j++
		}
		for ; j < len(cs); j++ {
			ch := cs[j]
			if quoted && ch == '\'' {
				j++
				break
			}
			if !quoted && (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r') {
				break
			}
			if ch == '\\' && j+1 < len(cs) {
				j++
				ch = cs[j]
			}
			value.WriteByte(ch)
		}
		i = j
		if !libpqKeywords[key] || key == "password" {
			continue
		}
		fmt.Fprintf(&b, "%s='%s' ", key, strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(value.String()))
	}
	return strings.TrimSpace(b.String()), pc.Password, nil
}

// skipKV skips white space and the spaces around a key/value string's '='.
func skipKV(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}
