package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/testenv"
)

// jsonRecords parses every line of a JSON log; a line that is not one JSON
// object fails t.
func jsonRecords(t *testing.T, log string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSuffix(log, "\n"), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("a log line is not a JSON record: %q: %v\nthe log:\n%s", line, err, log)
		}
		out = append(out, rec)
	}
	return out
}

// recordWith returns the first record whose field key is value.
func recordWith(t *testing.T, recs []map[string]any, key, value string) map[string]any {
	t.Helper()
	for _, r := range recs {
		if r[key] == value {
			return r
		}
	}
	t.Fatalf("no record with %s %q", key, value)
	return nil
}

// walapply run's JSON log, parsed: every line a record with a UTC time in
// milliseconds and the applier's name; the reconnect's wait in seconds
// (retry_in_seconds); the confirmed position as confirmed_lsn; a
// conflict's relation as plain schema.name.
func TestRunJSONLog(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		ctx := context.Background()
		pair := testenv.NewPair(t, testenv.PairOptions{Version: version})
		for _, c := range []*testenv.Cluster{pair.Source, pair.Target} {
			statusMust(t, c.Exec(ctx, `CREATE TABLE "T" (id int PRIMARY KEY, v text)`))
		}
		statusMust(t, pair.Source.Exec(ctx, `CREATE PUBLICATION p FOR TABLE "T"`))
		p := startWalapply(t, nil, "run", "--source", pair.Source.ConnString(""), "--target", pair.Target.ConnString(""),
			"--slot", "s", "--create-slot", "--publication", "p", "--name", "app1", "--log-format", "json",
			"--feedback-interval", "50ms", "--progress-interval", "200ms")
		p.waitStderr(t, `"message":"replicating"`, 1)
		statusMust(t, pair.Source.Exec(ctx, `INSERT INTO "T" VALUES (1, 'a'), (2, 'b')`))
		p.waitStderr(t, `"txns_applied":1`, 1)
		statusMust(t, pair.Target.Exec(ctx, `DELETE FROM "T" WHERE id = 1`))
		statusMust(t, pair.Source.Exec(ctx, `UPDATE "T" SET v = 'c' WHERE id = 1`))
		p.waitStderr(t, `"conflict":"update_missing"`, 1)
		statusMust(t, pair.Source.Exec(ctx, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = 's'"))
		p.waitStderr(t, `"message":"replicating"`, 2)
		if code := p.term(t); code != 0 {
			t.Fatalf("exit code %d after SIGTERM; log:\n%s", code, p.stderr)
		}

		t.Logf("the log:\n%s", p.stderr)
		recs := jsonRecords(t, p.stderr.String())
		for _, r := range recs {
			if r["applier"] != "app1" {
				t.Errorf("a record without applier app1: %v", r)
			}
			if ts, _ := r["time"].(string); !jsonLogTime.MatchString(ts) {
				t.Errorf("time %q is not RFC 3339 in UTC with milliseconds: %v", ts, r)
			}
		}
		retry := recordWith(t, recs, "message", "transient error; reconnecting")
		if s, ok := retry["retry_in_seconds"].(float64); !ok || s <= 0 || s > 60 {
			t.Errorf("the reconnect's wait: %v, want retry_in_seconds, a number of seconds", retry)
		}
		if _, ok := retry["retry_in"]; ok {
			t.Errorf("retry_in (milliseconds, no unit) is still logged: %v", retry)
		}
		conflict := recordWith(t, recs, "conflict", "update_missing")
		if conflict["relation"] != "public.T" {
			t.Errorf("the conflict's relation: %q, want public.T (plain, unquoted)", conflict["relation"])
		}
		progress := recordWith(t, recs, "message", "progress")
		if lsn, _ := progress["confirmed_lsn"].(string); lsn == "" {
			t.Errorf("the progress record has no confirmed_lsn: %v", progress)
		} else if _, err := protocol.ParseLSN(lsn); err != nil {
			t.Errorf("confirmed_lsn %q: %v", lsn, err)
		}
		if _, ok := progress["flushed_lsn"]; ok {
			t.Errorf("the progress record still names the confirmed position flushed_lsn: %v", progress)
		}
		stopped := recs[len(recs)-1]
		if stopped["message"] != "stopped" || stopped["level"] != "info" {
			t.Errorf("the last record after SIGTERM: %v", stopped)
		}
	})
}

// The error that stops walapply run is, in a JSON log, its last record and
// one JSON object: level fatal, the error's text, and the relation,
// operation, xid, commit LSN and SQLSTATE as fields where the error has
// them. First a missing target table, then, once it exists, a value the
// target rejects (a CHECK constraint: SQLSTATE 23514).
func TestRunFatalJSON(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		ctx := context.Background()
		pair := testenv.NewPair(t, testenv.PairOptions{Version: version})
		statusMust(t, pair.Source.Exec(ctx, `CREATE TABLE t (id int PRIMARY KEY, v int)`))
		statusMust(t, pair.Source.Exec(ctx, `CREATE PUBLICATION p FOR TABLE t`))
		statusMust(t, pair.Source.Exec(ctx, `SELECT pg_create_logical_replication_slot('s', 'pgoutput')`))
		statusMust(t, pair.Source.Exec(ctx, `INSERT INTO t VALUES (1, -1)`))
		args := []string{"run", "--source", pair.Source.ConnString(""), "--target", pair.Target.ConnString(""),
			"--slot", "s", "--publication", "p", "--log-format", "json"}

		fatal := func(want map[string]any, errText string) map[string]any {
			t.Helper()
			_, stderr, code := runWalapply(t, nil, args...)
			if code != 1 {
				t.Fatalf("exit code %d, want 1; stderr:\n%s", code, stderr)
			}
			recs := jsonRecords(t, stderr)
			last := recs[len(recs)-1]
			t.Logf("the fatal record: %s", lastLine(stderr))
			for k, v := range want {
				if last[k] != v {
					t.Errorf("the fatal record's %s = %v, want %v; record: %v", k, last[k], v, last)
				}
			}
			if e, _ := last["error"].(string); !strings.Contains(e, errText) {
				t.Errorf("the fatal record's error %q lacks %q", e, errText)
			}
			if xid, _ := last["xid"].(float64); xid <= 0 {
				t.Errorf("the fatal record's xid: %v", last["xid"])
			}
			if _, err := protocol.ParseLSN(toString(last["commit_lsn"])); err != nil {
				t.Errorf("the fatal record's commit_lsn %v: %v", last["commit_lsn"], err)
			}
			return last
		}
		first := fatal(map[string]any{"level": "fatal", "relation": "public.t", "applier": "s", "operation": "INSERT",
			"message": "stopped: an error that retrying does not fix"}, "the target table does not exist")
		if _, ok := first["sqlstate"]; ok {
			t.Errorf("a missing table (found by walapply, not by a statement) has a sqlstate: %v", first)
		}

		statusMust(t, pair.Target.Exec(ctx, `CREATE TABLE t (id int PRIMARY KEY, v int CHECK (v > 0))`))
		second := fatal(map[string]any{"level": "fatal", "relation": "public.t", "operation": "INSERT", "sqlstate": "23514"},
			"violates check constraint")
		if second["commit_lsn"] != first["commit_lsn"] || second["xid"] != first["xid"] {
			t.Errorf("the two failures name different transactions: %v and %v", first, second)
		}
	})
}

func toString(v any) string { s, _ := v.(string); return s }

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	return lines[len(lines)-1]
}
