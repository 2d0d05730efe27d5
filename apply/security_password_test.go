package apply_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/internal/testutil"
	"github.com/walapply/walapply/testenv"
)

// The passwords of TestPasswordsNeverPrinted. Each has a core without
// special characters, which any encoding of it (URL escapes, key/value
// quoting, .pgpass escapes) keeps; the tests look for the cores.
const (
	pwCore    = "Zx9s3cr3tQ"
	pwGood    = pwCore + ` 'q\u@:/?&%=`
	pwBadCore = "Wr0ngPwK7"
	pwBad     = pwBadCore + `'@`
)

// pwHBA demands walpw's password.
var pwHBA = []string{"host all walpw 127.0.0.1/32 scram-sha-256"}

// keyValue returns a key/value connection string for c as walpw with
// password, quoted the libpq way.
func keyValue(c *testenv.Cluster, port int, password string) string {
	q := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(password)
	return fmt.Sprintf("host=127.0.0.1 port=%d dbname=postgres user=walpw sslmode=disable password='%s'", port, q)
}

// deadPort returns a loopback port nothing listens on.
func deadPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

// checkNoSecret fails the test if text holds a password.
func checkNoSecret(t *testing.T, what, text string) {
	t.Helper()
	for _, s := range []string{pwCore, pwBadCore} {
		if i := strings.Index(text, s); i >= 0 {
			lo, hi := max(0, i-200), min(len(text), i+100)
			t.Errorf("%s prints a password: ...%s...", what, text[lo:hi])
		}
	}
}

// TestPasswordsNeverPrinted runs walapply with passwords from the
// connection string (URL and key/value), PGPASSWORD and a .pgpass file
// (PGPASSFILE), in runs that succeed and runs that fail (wrong password,
// unreachable target, malformed connection string, missing table), in
// process and as the walapply binary, and looks for the passwords in every
// log line and error.
func TestPasswordsNeverPrinted(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := secHarness(t, testenv.Options{Version: version, HBA: pwHBA}, testenv.Options{Version: version, HBA: pwHBA})
		src, dst := h.pair.Source, h.pair.Target
		role := "CREATE ROLE walpw LOGIN SUPERUSER PASSWORD " + secLiteral(pwGood)
		h.source(role, `CREATE TABLE t (id int PRIMARY KEY)`, `CREATE TABLE gone (id int PRIMARY KEY)`, `CREATE PUBLICATION pub FOR TABLE t, gone`)
		h.target(role, `CREATE TABLE t (id int PRIMARY KEY)`)
		h.createSlot("pw")
		log := &testutil.LogBuffer{}
		var errs []string
		next := 0
		// replicate runs the applier with cfg until one more row arrives.
		replicate := func(what string, cfg apply.Config) {
			t.Helper()
			next++
			stop := h.runApplier(cfg)
			h.source(fmt.Sprintf("INSERT INTO t VALUES (%d)", next))
			h.waitCaughtUp("pw", time.Minute)
			if err := stop(); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			h.expect("SELECT max(id)::text FROM t", strconv.Itoa(next))
		}
		// fail runs the applier until the permanent error it must stop with.
		fail := func(what string, cfg apply.Config, want string) {
			t.Helper()
			err := secRun(t, cfg)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: want an error with %q, got %v", what, want, err)
			}
			t.Logf("%s: %v", what, err)
			errs = append(errs, err.Error(), fmt.Sprintf("%+v", err))
		}
		base := h.secConfig("pw", "pub", log)

		// Successes: each way of giving the password.
		cfg := base
		cfg.Source, cfg.Target = secUserURL(src, "walpw", pwGood), secUserURL(dst, "walpw", pwGood)
		replicate("URL", cfg)
		cfg.Source, cfg.Target = keyValue(src, src.Port(), pwGood), keyValue(dst, dst.Port(), pwGood)
		replicate("key/value", cfg)
		cfg.Source, cfg.Target = secUserURL(src, "walpw", ""), secUserURL(dst, "walpw", "")
		t.Setenv("PGPASSWORD", pwGood)
		replicate("PGPASSWORD", cfg)
		os.Unsetenv("PGPASSWORD")
		pgpass := filepath.Join(t.TempDir(), "pgpass")
		esc := strings.NewReplacer(`\`, `\\`, `:`, `\:`).Replace(pwGood)
		lines := fmt.Sprintf("127.0.0.1:%d:*:walpw:%s\n127.0.0.1:%d:*:walpw:%s\n", src.Port(), esc, dst.Port(), esc)
		if err := os.WriteFile(pgpass, []byte(lines), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("PGPASSFILE", pgpass)
		replicate("PGPASSFILE", cfg)
		os.Unsetenv("PGPASSFILE")

		// Failures.
		cfg.Source, cfg.Target = secUserURL(src, "walpw", pwGood), secUserURL(dst, "walpw", pwBad)
		fail("wrong target password", cfg, "28P01")
		cfg.Source, cfg.Target = keyValue(src, src.Port(), pwBad), keyValue(dst, dst.Port(), pwGood)
		fail("wrong source password", cfg, "28P01")
		cfg.Source = strings.Replace(secUserURL(src, "walpw", pwGood), strconv.Itoa(src.Port()), "notaport", 1)
		fail("malformed source URL", cfg, "source")
		cfg.Source, cfg.Target = secUserURL(src, "walpw", pwGood), strings.Replace(secUserURL(dst, "walpw", pwGood), strconv.Itoa(dst.Port()), "notaport", 1)
		fail("malformed target URL", cfg, "target connection string")
		cfg.Target = keyValue(dst, dst.Port(), pwGood) + " port='unterminated"
		fail("malformed target key/value", cfg, "target connection string")

		// An unreachable target is retried: stop it after two retries.
		cfg.Target = keyValue(dst, deadPort(t), pwGood)
		before := strings.Count(log.String(), "transient error")
		stop := h.runApplier(cfg)
		secWaitCount(t, log, "transient error", before+2)
		if err := stop(); err != nil {
			t.Fatal(err)
		}

		// A missing table.
		cfg.Target = secUserURL(dst, "walpw", pwGood)
		h.source(`INSERT INTO gone VALUES (1)`)
		fail("missing table", cfg, "does not exist")

		checkNoSecret(t, "the in-process log", log.String())
		checkNoSecret(t, "the errors", strings.Join(errs, "\n"))
		if !strings.Contains(log.String(), "transient error") || !strings.Contains(log.String(), "replicating") {
			t.Error("the log lacks lines the runs must have written: is it captured?")
		}

		// The same through the walapply binary, its stdout and stderr.
		h.target(`CREATE TABLE gone (id int PRIMARY KEY)`)
		bin := walapplyBinary(t)
		out := &testutil.LogBuffer{}
		spill := filepath.Join(t.TempDir(), "spill")
		args := func(source, target string) []string {
			a := []string{"run"}
			if source != "" {
				a = append(a, "--source", source)
			}
			return append(a, "--target", target, "--slot", "pw", "--publication", "pub",
				"--feedback-interval", "100ms", "--log-level", "trace", "--spill-dir", spill)
		}
		env := os.Environ()
		good := args(secUserURL(src, "walpw", pwGood), secUserURL(dst, "walpw", pwGood))
		// Successes: the password in the flags; from WALAPPLY_SOURCE (a
		// key/value string) and PGPASSFILE; from PGPASSWORD.
		for _, c := range []struct {
			env  []string
			args []string
		}{
			{env, good},
			{append(slices.Clone(env), "WALAPPLY_SOURCE="+keyValue(src, src.Port(), pwGood), "PGPASSFILE="+pgpass), args("", secUserURL(dst, "walpw", ""))},
			{append(slices.Clone(env), "PGPASSWORD="+pwGood), args(secUserURL(src, "walpw", ""), secUserURL(dst, "walpw", ""))},
		} {
			next++
			h.source(fmt.Sprintf("INSERT INTO t VALUES (%d)", next))
			p := secStart(t, bin, c.env, out, c.args...)
			h.waitCaughtUp("pw", time.Minute)
			p.term(t)
			h.expect("SELECT max(id)::text FROM t", strconv.Itoa(next))
		}

		for _, c := range []struct {
			what string
			args []string
		}{
			{"wrong password", args(secUserURL(src, "walpw", pwBad), secUserURL(dst, "walpw", pwGood))},
			{"malformed source", args(strings.Replace(secUserURL(src, "walpw", pwGood), strconv.Itoa(src.Port()), "notaport", 1), secUserURL(dst, "walpw", pwGood))},
			{"bad flag", append(slices.Clone(good), "--feedback-interval", "bogus")},
		} {
			if err := secStart(t, bin, env, out, c.args...).wait(t); err == nil {
				t.Errorf("binary, %s: exit status 0", c.what)
			}
		}
		p := secStart(t, bin, env, out, args(secUserURL(src, "walpw", pwGood), keyValue(dst, deadPort(t), pwGood))...)
		secWaitCount(t, out, "transient error", 2)
		p.term(t)
		h.target(`DROP TABLE gone`)
		h.source(`INSERT INTO gone VALUES (2)`)
		if err := secStart(t, bin, env, out, good...).wait(t); err == nil {
			t.Error("binary, missing table: exit status 0")
		}
		text := out.String()
		checkNoSecret(t, "the walapply binary's output", text)
		for _, want := range []string{"28P01", "transient error", "does not exist", "replicating"} {
			if !strings.Contains(text, want) {
				t.Errorf("the binary's output lacks %q: is it captured?", want)
			}
		}
	})
}

// secProc is a walapply process, killed when the test ends.
type secProc struct{ *testutil.Process }

func secStart(t *testing.T, bin string, env []string, out *testutil.LogBuffer, args ...string) *secProc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = out, out
	p, err := testutil.StartProcess(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return &secProc{p}
}

// wait waits for the process to exit by itself.
func (p *secProc) wait(t *testing.T) error {
	t.Helper()
	exited, err := p.Wait(time.Minute)
	if !exited {
		t.Fatal("walapply did not exit by itself within a minute (retrying a permanent error?)")
	}
	return err
}

// term stops the process with SIGTERM and checks its clean exit.
func (p *secProc) term(t *testing.T) {
	t.Helper()
	_ = p.Signal(syscall.SIGTERM)
	if err := p.wait(t); err != nil {
		t.Errorf("walapply exited with %v after SIGTERM", err)
	}
}

// secWaitCount waits until log holds n occurrences of frag; a minute
// without them is a hang, not slowness.
func secWaitCount(t *testing.T, log *testutil.LogBuffer, frag string, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for strings.Count(log.String(), frag) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d times %q in the log after a minute, want %d", strings.Count(log.String(), frag), frag, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
