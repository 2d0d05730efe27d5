package secret_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/internal/secret"
	"github.com/walapply/walapply/internal/secret/secrettest"
)

// deadPort returns a loopback port nothing listens on.
func deadPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return strconv.Itoa(port)
}

// TestScrubAwkwardPasswords runs every awkward password in every form
// through pgconn's parse errors and connection errors (refused), and a
// message quoting the whole string: masked, none shows a piece of it; the
// host and port of a refused connection stay.
func TestScrubAwkwardPasswords(t *testing.T) {
	dead := deadPort(t)
	rawLeaks := 0
	for _, pw := range secrettest.Passwords {
		for _, f := range secrettest.Forms {
			for _, port := range []string{"notaport", dead} {
				cs := f.Make("127.0.0.1", port, "walpw", "postgres", pw)
				var err error
				if _, err = pgconn.ParseConfig(cs); err == nil {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					var c *pgconn.PgConn
					if c, err = pgconn.Connect(ctx, cs); err == nil {
						c.Close(ctx)
						t.Fatalf("%s: connected to a dead port", cs)
					}
					cancel()
				}
				for _, msg := range []string{err.Error(), "connecting with " + cs + ": failed"} {
					if secrettest.Leak(msg, pw) != "" {
						rawLeaks++
					}
					got := secret.Error(errors.New(msg), cs).Error()
					if piece := secrettest.Leak(got, pw); piece != "" {
						t.Errorf("password %q, form %s: %q shows %q: ...%s...", pw, f.Name, cs, piece, secrettest.Context(got, piece))
					}
					if strings.Contains(msg, "connection refused") && (!strings.Contains(got, "connection refused") || !strings.Contains(got, "127.0.0.1:"+dead)) {
						t.Errorf("password %q, form %s: the masked error lost the address or the cause: %s", pw, f.Name, got)
					}
				}
			}
		}
	}
	if rawLeaks == 0 {
		t.Error("no unmasked message showed a password: the test checks nothing")
	}
	t.Logf("%d of the unmasked messages showed a piece of a password", rawLeaks)
}

// TestScrubExamples pins what masking leaves of messages.
func TestScrubExamples(t *testing.T) {
	for _, tc := range []struct{ conn, msg, want string }{
		// The issue's: pgconn masked up to the first '@'.
		{
			conn: "postgres://wa_pw:pw@/Se%cr3t x'Tail9Zz@127.0.0.1:5433/postgres",
			msg:  "cannot parse `postgres://wa_pw:xxxxx@/Se%cr3t x'Tail9Zz@127.0.0.1:5433/postgres`: failed to parse as URL (invalid percent-encoded token: \"Se%cr3t x'Tail9Zz@127.0.0.1:5433/postgres\")",
			want: "cannot parse `postgres://wa_pw:xxxxx@127.0.0.1:5433/postgres`: failed to parse as URL (invalid percent-encoded token: \"xxxxx@127.0.0.1:5433/postgres\")",
		},
		// A connection error keeps what it says.
		{
			conn: "postgres://walpw:Secr3tPw@127.0.0.1:5433/postgres",
			msg:  "failed to connect to `user=walpw database=postgres`: 127.0.0.1:5433 (127.0.0.1): server error: FATAL: password authentication failed for user \"walpw\" (SQLSTATE 28P01)",
			want: "failed to connect to `user=walpw database=postgres`: 127.0.0.1:5433 (127.0.0.1): server error: FATAL: password authentication failed for user \"walpw\" (SQLSTATE 28P01)",
		},
		// An unquoted password with a space, which pgconn masks only up to it.
		{
			conn: "host=h port=x password=Secr3t Pw0rdTail user=u",
			msg:  "cannot parse `host=h port=x password=xxxxx Pw0rdTail user=u`: invalid port",
			want: "cannot parse `host=h port=x password=xxxxx user=u`: invalid port",
		},
		// Quoted with escapes, percent-encoded, JSON-escaped.
		{
			conn: `host=h password='quo\'te\\back'`,
			msg:  `{"error":"x quo'te\\back y"} quo'te\back`,
			want: `{"error":"x xxxxx y"} xxxxx`,
		},
		{
			conn: "postgres://u:a%2Fb%40cdef@h/db",
			msg:  "a/b@cdef and a%2Fb%40cdef",
			want: "xxxxx and xxxxx",
		},
		// A short password is masked whole; one too short stays.
		{conn: "postgres://u:abc@h/db", msg: "abc and ab", want: "xxxxx and ab"},
		// Not a connection string: nothing is masked.
		{conn: "walapply", msg: "walapply", want: "walapply"},
	} {
		if got := secret.Scrub(tc.msg, tc.conn); got != tc.want {
			t.Errorf("Scrub(%q, %q)\n = %q\nwant %q", tc.msg, tc.conn, got, tc.want)
		}
	}
}

// TestScrubUTF8 masks whole characters.
func TestScrubUTF8(t *testing.T) {
	got := secret.Scrub("ä pässwörd ö", "postgres://u:pässwörd@h/db")
	if got != "ä xxxxx ö" || !utf8.ValidString(got) {
		t.Errorf("got %q", got)
	}
	got = secret.Scrub("xässwö", "postgres://u:ssw@h/db?password=sswö")
	if !utf8.ValidString(got) || strings.Contains(got, "ssw") {
		t.Errorf("got %q", got)
	}
}

// TestScrubPGPASSWORD masks the password from the environment.
func TestScrubPGPASSWORD(t *testing.T) {
	t.Setenv("PGPASSWORD", "EnvSecr3t!")
	if got := secret.Scrub("the EnvSecr3t! one"); got != "the xxxxx one" {
		t.Errorf("got %q", got)
	}
}

// TestErrorChain: a masked error still answers errors.Is and errors.As,
// except for pgconn's parse error, which holds the string unmasked.
func TestErrorChain(t *testing.T) {
	cs := "postgres://u:Secr3tPw@127.0.0.1:1/db?connect_timeout=1"
	_, err := pgconn.Connect(context.Background(), cs)
	if err == nil {
		t.Fatal("connected to port 1")
	}
	got := secret.Error(err, cs)
	var ce *pgconn.ConnectError
	if !errors.As(got, &ce) || !errors.Is(got, syscall.ECONNREFUSED) {
		t.Errorf("the masked error lost its cause: %#v", got)
	}
	_, err = pgconn.ParseConfig("postgres://u:Secr3tPw@h:bad/db")
	got = secret.Error(err, "postgres://u:Secr3tPw@h:bad/db")
	var pe *pgconn.ParseConfigError
	if errors.As(got, &pe) {
		t.Errorf("the masked parse error still holds the string: %q", pe.ConnString)
	}
	if secret.Error(nil, cs) != nil {
		t.Error("Error(nil) is not nil")
	}
}

// TestWriter masks what goes through it.
func TestWriter(t *testing.T) {
	var b bytes.Buffer
	w := secret.New("password='Secr3tPw'").Writer(&b)
	line := "{\"error\":\"bad Secr3tPw\"}\n"
	if n, err := w.Write([]byte(line)); err != nil || n != len(line) {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if b.String() != "{\"error\":\"bad xxxxx\"}\n" {
		t.Errorf("wrote %q", b.String())
	}
	var nilSet *secret.Set
	if got := nilSet.Scrub("Secr3tPw"); got != "Secr3tPw" {
		t.Errorf("nil set masked: %q", got)
	}
}

// BenchmarkScrubLogLine is the cost a log line pays for the masking of
// the binary's stderr.
func BenchmarkScrubLogLine(b *testing.B) {
	s := secret.New("postgres://walapply:Zx9s3cr3tQ%20pw@db1:5432/app", "host=db2 password='An0ther s3cret'")
	line := `{"level":"trace","relation":"public.orders","lsn":"0/16B3748","xid":7412,"op":"update","columns":12,"time":"2026-12-01T15:20:04Z","message":"applying a change to the target table"}` + "\n"
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if s.Scrub(line) != line {
			b.Fatal("masked a line without a password")
		}
	}
}
