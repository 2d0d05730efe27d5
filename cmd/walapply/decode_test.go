package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/internal/testutil"
	"github.com/walapply/walapply/testenv"
)

// decodeSink collects the command's stdout and lets a test wait for a line.
type decodeSink struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newDecodeSink() *decodeSink { return &decodeSink{changed: make(chan struct{}, 1)} }

func (s *decodeSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
	return s.buf.Write(p)
}

func (s *decodeSink) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Split(strings.TrimSuffix(s.buf.String(), "\n"), "\n")
}

// decodeRun is the command running in a goroutine, as from a terminal.
type decodeRun struct {
	out    *decodeSink
	errOut *testutil.LogBuffer
	done   chan error
	cancel context.CancelFunc
}

func startDecode(t *testing.T, ctx context.Context, args ...string) *decodeRun {
	cctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	r := &decodeRun{out: newDecodeSink(), errOut: &testutil.LogBuffer{}, done: make(chan error, 1), cancel: cancel}
	go func() { r.done <- decodeMain(cctx, args, r.out, r.errOut) }()
	return r
}

// waitFor waits until a complete stdout line contains substr.
func (r *decodeRun) waitFor(t *testing.T, ctx context.Context, substr string) {
	t.Helper()
	for {
		r.out.mu.Lock()
		text := r.out.buf.String()
		r.out.mu.Unlock()
		if i := strings.Index(text, substr); i >= 0 && strings.Contains(text[i:], "\n") {
			return
		}
		select {
		case <-r.out.changed:
		case err := <-r.done:
			t.Fatalf("decode ended before printing %q: %v\nstderr: %s\noutput:\n%s", substr, err, r.errOut, text)
		case <-ctx.Done():
			t.Fatalf("no line with %q: %v\noutput:\n%s", substr, ctx.Err(), text)
		}
	}
}

// waitStderr waits until stderr contains substr.
func (r *decodeRun) waitStderr(t *testing.T, ctx context.Context, substr string) {
	t.Helper()
	for !strings.Contains(r.errOut.String(), substr) {
		select {
		case err := <-r.done:
			t.Fatalf("decode ended: %v\nstderr: %s", err, r.errOut)
		case <-ctx.Done():
			t.Fatalf("no %q on stderr: %v", substr, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// stop cancels the context, as SIGINT does, and returns the command's error.
func (r *decodeRun) stop(ctx context.Context) error {
	r.cancel()
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("decode did not stop: %w", ctx.Err())
	}
}

var decodeLSNText = regexp.MustCompile(`^[0-9A-F]+/[0-9A-F]+$`)

// summarizeDecode turns JSON lines into short descriptions and checks the fields
// that cannot be written down in advance (LSNs, times, xids) relationally.
func summarizeDecode(t *testing.T, lines []string) []string {
	t.Helper()
	var out []string
	var begin map[string]any
	for _, line := range lines {
		var m map[string]any
		d := json.NewDecoder(strings.NewReader(line))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			t.Fatalf("not a JSON object: %q: %v", line, err)
		}
		for k, v := range m {
			if strings.HasSuffix(k, "_lsn") || k == "wal_start" || k == "lsn" {
				if s, _ := v.(string); !decodeLSNText.MatchString(s) {
					t.Errorf("%s = %v is not an LSN in %s", k, v, line)
				}
			}
			if strings.HasSuffix(k, "_time") {
				if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(v)); err != nil {
					t.Errorf("%s = %v: %v", k, v, err)
				}
			}
		}
		typ := fmt.Sprint(m["type"])
		s := typ
		switch typ {
		case "begin":
			begin = m
		case "commit":
			if begin == nil || m["commit_lsn"] != begin["final_lsn"] || m["commit_time"] != begin["commit_time"] {
				t.Errorf("commit %v does not match begin %v", m, begin)
			}
			begin = nil
		case "type":
			s += " " + fmt.Sprint(m["namespace"], ".", m["name"])
		case "relation":
			var cols []string
			for _, c := range m["columns"].([]any) {
				c := c.(map[string]any)
				col := fmt.Sprint(c["name"])
				if c["key"] == true {
					col += ":key"
				}
				if tn, ok := c["type"]; ok {
					col += ":" + fmt.Sprint(tn)
				}
				cols = append(cols, col)
			}
			s += fmt.Sprintf(" %s.%s %s [%s]", m["namespace"], m["name"], m["replica_identity"], strings.Join(cols, " "))
		case "insert", "update", "delete":
			s += " " + fmt.Sprint(m["relation"])
			for _, part := range []string{"old_key", "old", "new"} {
				if cols, ok := m[part].([]any); ok {
					s += " " + part + "(" + decodeColumns(cols) + ")"
				}
			}
		case "truncate":
			s += fmt.Sprintf(" %v cascade=%v restart=%v", m["relations"], m["cascade"], m["restart_identity"])
		case "message":
			content := m["content"]
			if c, ok := content.(string); ok && len(c) > 20 {
				content = fmt.Sprintf("<%d bytes>", len(c))
			}
			s += fmt.Sprintf(" %v transactional=%v %v", m["prefix"], m["transactional"], content)
		case "stream_start":
			if m["first_segment"] == true {
				s += " first"
			}
		case "begin_prepare", "prepare", "commit_prepared":
			s += " " + fmt.Sprint(m["gid"])
		}
		if _, ok := m["xid"]; ok && typ != "begin" && !strings.Contains(typ, "prepare") && !strings.HasPrefix(typ, "stream_") {
			s += " (streamed)"
		}
		out = append(out, s)
	}
	return out
}

func decodeColumns(cols []any) string {
	var parts []string
	for _, c := range cols {
		c := c.(map[string]any)
		v := fmt.Sprint(c["kind"])
		switch v {
		case "text":
			v = fmt.Sprintf("%q", c["value"])
		case "binary":
			v = "0x" + fmt.Sprint(c["value_hex"])
		}
		parts = append(parts, fmt.Sprint(c["name"], "=", v))
	}
	return strings.Join(parts, " ")
}

func decodeSlotFlush(t *testing.T, ctx context.Context, conn *pgx.Conn, slot string) string {
	t.Helper()
	var lsn string
	if err := conn.QueryRow(ctx, "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	return lsn
}

func TestDecodeCommand(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		pair := testenv.NewPair(t, testenv.PairOptions{Version: version, SourceSettings: map[string]string{"logical_decoding_work_mem": "64kB"}})
		src := pair.Source
		conn, err := src.Connect(ctx, "postgres")
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		exec := func(sqls ...string) {
			t.Helper()
			testenv.MustExecConn(t, ctx, conn, sqls...)
		}
		exec("CREATE TYPE mood AS ENUM ('sad', 'happy')",
			"CREATE TABLE t (id int PRIMARY KEY, v text, m mood)",
			"CREATE TABLE t2 (id int)",
			"CREATE PUBLICATION pub FOR TABLE t, t2")
		base := []string{"--source", src.ConnString("postgres"), "--slot", "dec", "--publication", "pub", "--messages", "--streaming", "on"}

		// Run 1 creates a two-phase slot and peeks: the slot stays put.
		run := startDecode(t, ctx, append(base, "--create-slot", "--two-phase")...)
		run.waitStderr(t, ctx, "created replication slot") // before the workload
		created := decodeSlotFlush(t, ctx, conn, "dec")
		exec(`INSERT INTO t VALUES (1, 'one', 'happy'), (2, E'tab\there "q" \\ ü', NULL)`,
			"UPDATE t SET id = 3 WHERE id = 2",
			"DELETE FROM t WHERE id = 1",
			"TRUNCATE t2",
			"BEGIN",
			"INSERT INTO t VALUES (10, 'ten', 'sad')",
			"SELECT pg_logical_emit_message(true, 'big', repeat('x', 70000))", // > logical_decoding_work_mem: streams
			"INSERT INTO t VALUES (11, 'eleven', 'sad')",
			"COMMIT",
			"BEGIN",
			"INSERT INTO t VALUES (20, 'p', NULL)",
			"PREPARE TRANSACTION 'g1'",
			"COMMIT PREPARED 'g1'",
			"SELECT pg_logical_emit_message(false, 'end', 'one')")
		run.waitFor(t, ctx, `"prefix":"end"`)
		if err := run.stop(ctx); err != nil {
			t.Fatalf("decode after SIGINT: %v\nstderr: %s", err, run.errOut)
		}
		want := []string{
			"begin", "type public.mood",
			"relation public.t default [id:key v m:public.mood]",
			`insert public.t new(id="1" v="one" m="happy")`,
			`insert public.t new(id="2" v="tab\there \"q\" \\ ü" m=null)`,
			"commit",
			"begin", `update public.t old_key(id="2" v=null m=null) new(id="3" v="tab\there \"q\" \\ ü" m=null)`, "commit",
			"begin", `delete public.t old_key(id="1" v=null m=null)`, "commit",
			"begin", "relation public.t2 default [id]", "truncate [public.t2] cascade=false restart=false", "commit",
			"stream_start first", "type public.mood (streamed)", "relation public.t default [id:key v m:public.mood] (streamed)",
			`insert public.t new(id="10" v="ten" m="sad") (streamed)`, "message big transactional=true <70000 bytes> (streamed)", "stream_stop",
			"stream_start", `insert public.t new(id="11" v="eleven" m="sad") (streamed)`, "stream_stop", "stream_commit",
			"begin_prepare g1", `insert public.t new(id="20" v="p" m=null)`, "prepare g1", "commit_prepared g1",
			"message end transactional=false one",
		}
		lines1 := run.out.lines()
		if got := summarizeDecode(t, lines1); !slices.Equal(got, want) {
			t.Errorf("run 1 output:\n%s\nwant:\n%s\nraw:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), strings.Join(lines1, "\n"))
		}
		if got := decodeSlotFlush(t, ctx, conn, "dec"); got != created {
			t.Errorf("without --confirm the slot moved from %s to %s", created, got)
		}

		// Run 2 confirms, in binary (int4 big-endian, text and enum labels as
		// their bytes): the same transactions again, and the slot ends at
		// the last printed transaction's end.
		run = startDecode(t, ctx, append(base, "--confirm", "--binary", "--two-phase")...)
		run.waitFor(t, ctx, `"prefix":"end"`)
		if err := run.stop(ctx); err != nil {
			t.Fatalf("decode --confirm: %v\nstderr: %s", err, run.errOut)
		}
		lines2 := run.out.lines()
		got2 := summarizeDecode(t, lines2)
		if len(got2) != len(want) || got2[3] != `insert public.t new(id=0x00000001 v=0x6f6e65 m=0x6861707079)` {
			t.Errorf("run 2 (--binary) output:\n%s", strings.Join(got2, "\n"))
		}
		var last struct {
			Type   string `json:"type"`
			EndLSN string `json:"end_lsn"`
		}
		if err := json.Unmarshal([]byte(lines2[len(lines2)-2]), &last); err != nil || last.Type != "commit_prepared" {
			t.Fatalf("second-to-last line %s: %v", lines2[len(lines2)-2], err)
		}
		if got := decodeSlotFlush(t, ctx, conn, "dec"); got != last.EndLSN {
			t.Errorf("after --confirm the slot is at %s, want the commit prepared end %s", got, last.EndLSN)
		}

		// Run 3 starts where run 2 confirmed: only what came after.
		run = startDecode(t, ctx, append(base, "--two-phase")...)
		exec("INSERT INTO t VALUES (30, 'thirty', NULL)", "SELECT pg_logical_emit_message(false, 'end2', 'two')")
		run.waitFor(t, ctx, `"prefix":"end2"`)
		if err := run.stop(ctx); err != nil {
			t.Fatalf("decode run 3: %v\nstderr: %s", err, run.errOut)
		}
		want3 := []string{"message end transactional=false one", "begin", "type public.mood",
			"relation public.t default [id:key v m:public.mood]", `insert public.t new(id="30" v="thirty" m=null)`, "commit",
			"message end2 transactional=false two"}
		if got := summarizeDecode(t, run.out.lines()); !slices.Equal(got, want3) {
			t.Errorf("run 3 output:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want3, "\n"))
		}

		// Errors say what failed and what to do.
		exec("SELECT pg_create_logical_replication_slot('plain', 'pgoutput')")
		errorCases := []struct {
			args []string
			want string
		}{
			{[]string{"--slot", "dec", "--publication", "pub"}, "--source is required (or set WALAPPLY_SOURCE)"},
			{[]string{"--source", src.ConnString("postgres"), "--slot", "nope", "--publication", "pub"}, `replication slot "nope" does not exist on the source; create it with --create-slot`},
			{[]string{"--source", src.ConnString("postgres"), "--slot", "plain", "--publication", "pub", "--two-phase"}, "--two-phase would turn it on for good"},
			{[]string{"--source", src.ConnString("postgres"), "--slot", "dec", "--publication", "pub", "--protocol-version", "2"}, "needs protocol version 3 or later; raise --protocol-version"},
			{[]string{"--source", src.ConnString("postgres"), "--slot", "dec", "--publication", "pub", "--start", "nonsense"}, "--start: protocol: invalid LSN"},
			{[]string{"--source", "postgres://postgres:hunter2@127.0.0.1:1/x?connect_timeout=2", "--slot", "dec", "--publication", "pub"}, "protocol: connect to the source"},
		}
		if version < 16 {
			errorCases = append(errorCases, struct {
				args []string
				want string
			}{[]string{"--source", src.ConnString("postgres"), "--slot", "plain", "--publication", "pub", "--streaming", "parallel"},
				fmt.Sprintf(`streaming "parallel" needs PostgreSQL 16 or later (source is %d.`, version)})
		}
		for _, tc := range errorCases {
			var so, se bytes.Buffer
			err := decodeMain(ctx, tc.args, &so, &se)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("decode %v = %v, want an error containing %q", tc.args, err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error shows the password: %v", err)
			}
			if so.Len() != 0 {
				t.Errorf("decode %v printed %q", tc.args, so.String())
			}
		}
	})
}
