package apply_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/testenv"
)

// untilSetup makes table t published as pub with slot "u" created before
// n small transactions, and returns each one's commit LSN, read from a
// second pgoutput slot. Transaction i inserts row i and updates row i-1,
// so that the target as of a transaction is exactly untilRows.
func untilSetup(h *harness, n int) []protocol.LSN {
	h.t.Helper()
	h.both("CREATE TABLE t (id int PRIMARY KEY, v text)")
	h.source("CREATE PUBLICATION pub FOR TABLE t")
	h.createSlot("u")
	h.createSlot("peek")
	var sqls []string
	for i := 1; i <= n; i++ {
		sqls = append(sqls, fmt.Sprintf("INSERT INTO t VALUES (%d, 'v%d'); UPDATE t SET v = 'u' WHERE id = %d", i, i, i-1))
	}
	h.source(sqls...)
	conn, err := h.pair.Source.Connect(h.ctx, "postgres")
	if err != nil {
		h.t.Fatal(err)
	}
	defer conn.Close(h.ctx)
	rows, err := conn.Query(h.ctx, `SELECT data FROM pg_logical_slot_peek_binary_changes('peek', NULL, NULL, 'proto_version', '1', 'publication_names', 'pub')`)
	if err != nil {
		h.t.Fatal(err)
	}
	var lsns []protocol.LSN
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			h.t.Fatal(err)
		}
		if len(data) >= 9 && data[0] == 'B' { // Begin: its final (commit) LSN
			lsns = append(lsns, protocol.LSN(binary.BigEndian.Uint64(data[1:9])))
		}
	}
	if rows.Err() != nil || len(lsns) != n {
		h.t.Fatalf("peeking the commit LSNs: %d of %d, %v", len(lsns), n, rows.Err())
	}
	h.source("SELECT pg_drop_replication_slot('peek')")
	return lsns
}

// untilRows is table t after the first k transactions of untilSetup, as
// untilQuery reads it.
func untilRows(k int) []string {
	var out []string
	for i := 1; i < k; i++ {
		out = append(out, strconv.Itoa(i)+" u")
	}
	return append(out, fmt.Sprintf("%d v%d", k, k))
}

const untilQuery = "SELECT id || ' ' || v FROM t"

// --until LSN with group commit and a backlog of small transactions
// around it: exactly the transactions that commit at or before it are
// applied (the one whose commit LSN it is included), the run stops by
// itself, and a later run without --until applies the rest exactly once.
func TestUntilLSN(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		lsns := untilSetup(h, 80)
		const k = 47
		cfg := h.config("u", "pub")
		cfg.Until = lsns[k-1]
		var reached []apply.UntilReached
		cfg.OnUntilReached = func(r apply.UntilReached) { reached = append(reached, r) }
		ctx, cancel := context.WithTimeout(h.ctx, time.Minute)
		defer cancel()
		if err := apply.Run(ctx, cfg); err != nil || ctx.Err() != nil {
			t.Fatalf("run --until %s: %v, %v", cfg.Until, err, ctx.Err())
		}
		h.expect(untilQuery, untilRows(k)...)
		if len(reached) != 1 || reached[0].Until != lsns[k-1] || reached[0].Applied <= lsns[k-1] || reached[0].Applied > lsns[k] {
			t.Errorf("reached %+v; want until %s, applied just past it (before %s)", reached, lsns[k-1], lsns[k])
		}
		h.expect("SELECT until_lsn::text || ' ' || (until_reached_at IS NOT NULL) FROM walapply.appliers", lsns[k-1].String()+" true")

		// A position between two commits, after the next transaction's
		// first change: that transaction commits after it.
		const k2 = k + 9
		cfg.Until, reached = lsns[k2]-1, nil
		if err := apply.Run(ctx, cfg); err != nil || ctx.Err() != nil {
			t.Fatalf("run --until %s: %v, %v", cfg.Until, err, ctx.Err())
		}
		h.expect(untilQuery, untilRows(k2)...)
		if len(reached) != 1 || reached[0].Until != lsns[k2]-1 {
			t.Errorf("reached %+v; want until %s", reached, lsns[k2]-1)
		}

		// Nothing after the position was confirmed as applied: a run
		// without --until applies the rest, once.
		cfg.Until, cfg.OnUntilReached = 0, nil
		stop := h.runApplier(cfg)
		h.waitCaughtUp("u", time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		h.expect(untilQuery, untilRows(80)...)
		h.expect("SELECT coalesce(until_lsn::text, 'none') || ' ' || (until_reached_at IS NOT NULL) FROM walapply.appliers", "none false")
	})
}

// --until now with nothing more to come: the run stops once what the
// source had committed is applied; the binary prints the position on its
// last stdout line and exits 0, status shows it; and SIGUSR1 stops an
// applier started without --until in the same way.
func TestUntilNowCommand(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, nil, nil)
		untilSetup(h, 20)
		bin := walapplyBinary(t)
		src, dst := h.pair.Source.ConnString("postgres"), h.pair.Target.ConnString("postgres")
		args := []string{"run", "--source", src, "--target", dst, "--slot", "u", "--publication", "pub",
			"--feedback-interval", "100ms", "--log-format", "json", "--spill-dir", filepath.Join(t.TempDir(), "spill")}
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(bin, append(args, "--until", "now")...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		timer := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Kill() })
		err := cmd.Run()
		timer.Stop()
		if err != nil {
			t.Fatalf("run --until now on an idle source: %v\n%s", err, stderr.String())
		}
		h.expect(untilQuery, untilRows(20)...)
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		last := lines[len(lines)-1]
		if !strings.HasPrefix(last, "reached ") || !strings.Contains(stderr.String(), "reached the --until position") {
			t.Errorf("last stdout line %q; log:\n%s", last, stderr.String())
		}
		lsn := strings.TrimSuffix(strings.Fields(last)[1], ":")
		out, err := exec.Command(bin, "status", "--target", dst).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "reached "+lsn+" at ") {
			t.Errorf("status after --until now: %v\n%s", err, out)
		}
		t.Logf("stdout: %s\nstatus:\n%s", last, out)

		// SIGUSR1: "until now" for a running applier.
		h.source("INSERT INTO t VALUES (21, 'u')")
		p := &childProcess{t: t, args: append([]string{bin}, args...), out: &stderr}
		p.start()
		h.waitCaughtUp("u", time.Minute)
		h.source("INSERT INTO t VALUES (22, 'u')")
		if err := p.proc.Signal(syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		if exited, err := p.wait(time.Minute); !exited {
			p.kill()
			t.Fatal("walapply run did not stop within a minute of SIGUSR1")
		} else if err != nil {
			t.Fatalf("walapply run after SIGUSR1: %v", err)
		}
		h.expect(untilQuery, append(untilRows(20), "21 u", "22 u")...)
	})
}

// A large transaction streamed in progress (logical_decoding_work_mem)
// that commits after --until is not applied, whether the stop comes in
// the middle of its stream or at its commit; the next run applies it.
func TestUntilStreamed(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, map[string]string{"logical_decoding_work_mem": "64kB"}, nil)
		h.both("CREATE TABLE t (id int PRIMARY KEY, v text)")
		h.source("CREATE PUBLICATION pub FOR TABLE t")
		h.createSlot("u")
		h.source("INSERT INTO t VALUES (1, 'before')")
		until, err := protocol.ParseLSN(h.rows(h.pair.Source, "SELECT pg_current_wal_lsn()::text")[0])
		if err != nil {
			t.Fatal(err)
		}
		h.source("INSERT INTO t SELECT i, repeat('x', 200) FROM generate_series(2, 3000) i")
		cfg := h.config("u", "pub")
		cfg.Until = until
		ctx, cancel := context.WithTimeout(h.ctx, time.Minute)
		defer cancel()
		if err := apply.Run(ctx, cfg); err != nil || ctx.Err() != nil {
			t.Fatalf("run --until %s: %v, %v", until, err, ctx.Err())
		}
		h.expect("SELECT id || ' ' || v FROM t", "1 before")
		cfg.Until = 0
		stop := h.runApplier(cfg)
		h.waitCaughtUp("u", time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		h.expect("SELECT count(*)::text FROM t", "3000")
	})
}
