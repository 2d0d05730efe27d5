package apply_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/walapply/walapply/testenv"
)

// The runbook of docs/MIGRATION.md with the binary, on a source written
// to during the copy and the streaming: run --copy --create-slot, stop
// the writes, SIGUSR1 ("until now"), compare (equal, exit 0), sequences.
func TestMigrationRunbook(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		runbook(t, newHarness(t, version, nil, nil), false)
	})
}

// TestMigrationRunbookSchema is the whole path: a PostgreSQL 15
// source written to during the run migrates to an empty PostgreSQL 18
// target with run --copy --schema (tables created from pg_dump, the big
// one copied in ranges), is cut over with SIGUSR1 ("until now"), compared
// equal and has its sequences set.
func TestMigrationRunbookSchema(t *testing.T) {
	schemaPairs(t, func(t *testing.T, h *harness) {
		if h.pair.Target.Version() != 18 {
			t.Skip("the whole path is tested from 15 into an empty 18 target; TestCopySchema covers 15 into 15")
		}
		runbook(t, h, true)
	})
}

// runbook follows docs/MIGRATION.md; with schema, the target starts empty
// and run creates the tables (--schema) and copies accounts in ranges.
func runbook(t *testing.T, h *harness, schema bool) {
	{
		ddl := []string{`CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL, note text)`,
			`CREATE TABLE history (id bigserial PRIMARY KEY, account int NOT NULL, delta int NOT NULL, at timestamptz NOT NULL DEFAULT now())`}
		if schema {
			h.source(ddl...)
		} else {
			h.both(ddl...)
		}
		h.source(`INSERT INTO accounts SELECT i, 0, repeat('n', i % 50) FROM generate_series(1, 5000) i`,
			`INSERT INTO history (account, delta) SELECT i % 5000 + 1, i FROM generate_series(1, 5000) i`,
			`CREATE PUBLICATION migrate FOR TABLE accounts, history`)
		bin := walapplyBinary(t)
		src, dst := h.pair.Source.ConnString("postgres"), h.pair.Target.ConnString("postgres")

		// Writes during the whole copy and streaming.
		ctx, stopWriting := context.WithCancel(h.ctx)
		var wg sync.WaitGroup
		var writeErr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := h.pair.Source.Connect(h.ctx, "postgres")
			if err != nil {
				writeErr = err
				return
			}
			defer conn.Close(h.ctx)
			for ctx.Err() == nil {
				a, d := rand.IntN(5000)+1, rand.IntN(100)-50
				_, err := conn.Exec(h.ctx, fmt.Sprintf(`UPDATE accounts SET balance = balance + %d WHERE id = %d;
					INSERT INTO history (account, delta) VALUES (%d, %d)`, d, a, a, d))
				if err != nil {
					writeErr = err
					return
				}
			}
		}()

		var out bytes.Buffer
		p := &childProcess{t: t, args: []string{bin, "run", "--source", src, "--target", dst, "--slot", "migrate", "--create-slot",
			"--publication", "migrate", "--copy", "--feedback-interval", "100ms", "--log-format", "json",
			"--spill-dir", filepath.Join(t.TempDir(), "spill")}, out: &out}
		if schema {
			p.args = append(p.args, "--schema", "--copy-split-size", "64kB", "--copy-workers", "3")
		}
		p.start()
		time.Sleep(1500 * time.Millisecond)
		stopWriting()
		wg.Wait()
		if writeErr != nil && !errors.Is(writeErr, context.Canceled) {
			t.Fatal(writeErr)
		}
		if err := p.proc.Signal(syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		if exited, err := p.wait(time.Minute); !exited {
			p.kill()
			t.Fatalf("walapply run did not stop within a minute of SIGUSR1\n%s", out.String())
		} else if err != nil || !strings.Contains(out.String(), "reached ") {
			t.Fatalf("walapply run after SIGUSR1: %v\n%s", err, out.String())
		}

		cmp, err := exec.Command(bin, "compare", "--source", src, "--target", dst, "--publication", "migrate", "--jobs", "2").CombinedOutput()
		if err != nil || !strings.Contains(string(cmp), "2 tables: 2 equal, 0 different") {
			t.Fatalf("compare after the cut-over: %v\n%s", err, cmp)
		}
		t.Logf("compare:\n%s", cmp)
		seq, err := exec.Command(bin, "sequences", "--source", src, "--target", dst, "--publication", "migrate").CombinedOutput()
		if err != nil {
			t.Fatalf("sequences: %v\n%s", err, seq)
		}
		// The application writes on the target now.
		h.target(`INSERT INTO history (account, delta) VALUES (1, 1)`)
		if schema {
			h.expect(`SELECT (count(*) > 1)::text FROM walapply.copy_ranges WHERE table_name = 'accounts' AND status = 'done'`, "true")
		}
	}
}
