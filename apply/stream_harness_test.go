package apply_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/internal/testutil"
	"github.com/walapply/walapply/testenv"
)

// streamSettings makes the source stream every transaction it can: at 64kB
// of decoded changes on any version, and at once on 16+.
func streamSettings(version int) map[string]string {
	s := map[string]string{"logical_decoding_work_mem": "64kB"}
	if version >= 16 {
		s["debug_logical_replication_streaming"] = "immediate"
	}
	return s
}

// waitLog waits until a log line contains every fragment and returns it.
func (h *harness) waitLog(l *testutil.LogBuffer, timeout time.Duration, frags ...string) string {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if line, ok := l.Line(frags...); ok {
			return line
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("no log line with %q within %s", frags, timeout)
		}
		select {
		case err := <-h.applierDone:
			h.t.Fatalf("the applier stopped while waiting for a log line with %q: %v", frags, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitCount waits until at least n log lines contain every fragment.
func (h *harness) waitCount(l *testutil.LogBuffer, n int, timeout time.Duration, frags ...string) {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	for l.Count(frags...) < n {
		if time.Now().After(deadline) {
			h.t.Fatalf("%d log lines with %q within %s, want %d", l.Count(frags...), frags, timeout, n)
		}
		select {
		case err := <-h.applierDone:
			h.t.Fatalf("the applier stopped while waiting for log lines with %q: %v", frags, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// streamConfig is h.config with streaming in mode, a spill directory of the
// test's own and the log kept.
func (h *harness) streamConfig(slot, mode string, pubs ...string) (apply.Config, *testutil.LogBuffer) {
	cfg := h.config(slot, pubs...)
	cfg.Streaming = mode
	cfg.SpillDir = filepath.Join(h.t.TempDir(), "spill")
	logs := &testutil.LogBuffer{}
	cfg.Logger = zerolog.New(zerolog.MultiLevelWriter(zerolog.NewTestWriter(h.t), logs)).Level(zerolog.DebugLevel)
	return cfg, logs
}

// conn opens a connection to a cluster of the pair for the test.
func (h *harness) conn(source bool) *pgx.Conn {
	h.t.Helper()
	c := h.pair.Target
	if source {
		c = h.pair.Source
	}
	conn, err := c.Connect(h.ctx, "postgres")
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { conn.Close(h.ctx) })
	return conn
}

// run executes statements on conn.
func (h *harness) run(conn *pgx.Conn, sqls ...string) {
	h.t.Helper()
	testenv.MustExecConn(h.t, h.ctx, conn, sqls...)
}

// scalar returns the single text value a query returns on a cluster.
func (h *harness) scalar(source bool, query string, args ...any) string {
	h.t.Helper()
	c := h.pair.Target
	if source {
		c = h.pair.Source
	}
	conn, err := c.Connect(h.ctx, "postgres")
	if err != nil {
		h.t.Fatal(err)
	}
	defer conn.Close(h.ctx)
	var s *string
	if err := conn.QueryRow(h.ctx, query, args...).Scan(&s); err != nil {
		h.t.Fatalf("%s: %v", query, err)
	}
	if s == nil {
		return ""
	}
	return *s
}

// streamedTxns is how many transactions the source streamed through slot.
func (h *harness) streamedTxns(slot string) string {
	return h.scalar(true, "SELECT stream_txns::text FROM pg_stat_replication_slots WHERE slot_name = $1", slot)
}

// spillFiles lists the spill files in dir.
func spillFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".spill") {
			out = append(out, e.Name())
		}
	}
	return out
}
