package apply_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
	"github.com/walapply/walapply/apply"
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

// logBuffer keeps the applier's log for assertions, as well as writing it
// to the test log.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// count returns how many log lines contain every fragment.
func (l *logBuffer) count(frags ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range strings.Split(l.b.String(), "\n") {
		ok := true
		for _, f := range frags {
			ok = ok && strings.Contains(line, f)
		}
		if ok && line != "" {
			n++
		}
	}
	return n
}

// waitLog waits until a log line contains every fragment and returns it.
func (h *harness) waitLog(l *logBuffer, timeout time.Duration, frags ...string) string {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		l.mu.Lock()
		text := l.b.String()
		l.mu.Unlock()
		for _, line := range strings.Split(text, "\n") {
			ok := line != ""
			for _, f := range frags {
				ok = ok && strings.Contains(line, f)
			}
			if ok {
				return line
			}
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
func (h *harness) waitCount(l *logBuffer, n int, timeout time.Duration, frags ...string) {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	for l.count(frags...) < n {
		if time.Now().After(deadline) {
			h.t.Fatalf("%d log lines with %q within %s, want %d", l.count(frags...), frags, timeout, n)
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
func (h *harness) streamConfig(slot, mode string, pubs ...string) (apply.Config, *logBuffer) {
	cfg := h.config(slot, pubs...)
	cfg.Streaming = mode
	cfg.SpillDir = filepath.Join(h.t.TempDir(), "spill")
	logs := &logBuffer{}
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
	for _, s := range sqls {
		if _, err := conn.Exec(h.ctx, s); err != nil {
			h.t.Fatalf("executing %q: %v", s, err)
		}
	}
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
