package schema

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/rs/zerolog"
	"github.com/walapply/walapply/internal/testutil"
)

// fakeTarget hands out fakeConns that share one list of failing statements
// and records, per connection, what ran.
type fakeTarget struct {
	fail  map[string]*pgconn.PgError
	block map[string]bool
	mu    sync.Mutex
	conns []*fakeConn
}

func (t *fakeTarget) connect(context.Context) (Execer, func(), error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := &fakeConn{fail: t.fail, block: t.block}
	t.conns = append(t.conns, c)
	return c, func() {}, nil
}

var postData = []Entry{
	{Name: "accounts accounts_pkey", Kind: "CONSTRAINT", Schema: "app", SQL: "ALTER TABLE app.accounts ADD PRIMARY KEY (id);\n"},
	{Name: "m fk", Kind: "FK CONSTRAINT", Schema: "Other Sch", SQL: "ALTER TABLE m ADD FOREIGN KEY (a) REFERENCES app.accounts;\n"},
	{Name: "accounts_balance", Kind: "INDEX", Schema: "app", SQL: "CREATE INDEX accounts_balance ON app.accounts (balance);\n"},
	{Name: "touch", Kind: "TRIGGER", Schema: "app", SQL: "CREATE TRIGGER touch;\n"},
}

// TestBuildPostData: every connection runs the preamble; the builds run on
// connections of their own, and the rest, in order, on one more once they
// are done; objects already there are logged and left alone.
func TestBuildPostData(t *testing.T) {
	target := &fakeTarget{fail: map[string]*pgconn.PgError{postData[0].SQL: {Code: "42P16"}, postData[2].SQL: {Code: "42P07"}, postData[3].SQL: {Code: "42710"}}}
	var log testutil.LogBuffer
	if err := BuildPostData(context.Background(), "SET lock_timeout = 0;\n", postData, 4, target.connect, zerolog.New(&log)); err != nil {
		t.Fatal(err)
	}
	if len(target.conns) != 3 { // min(workers, builds), and one for the rest
		t.Fatalf("%d connections, want 3", len(target.conns))
	}
	var builds []string
	for _, c := range target.conns[:2] {
		builds = append(builds, c.ran[1:]...)
	}
	slices.Sort(builds)
	if want := []string{postData[0].SQL, postData[2].SQL}; !slices.Equal(builds, want) {
		t.Errorf("builds ran %q, want %q", builds, want)
	}
	if got, want := target.conns[2].ran, []string{"SET lock_timeout = 0;", postData[1].SQL, postData[3].SQL}; !slices.Equal(got, want) {
		t.Errorf("the rest ran %q, want %q", got, want)
	}
	for _, c := range target.conns {
		if len(c.ran) == 0 || c.ran[0] != "SET lock_timeout = 0;" {
			t.Errorf("a connection ran %q, without the preamble first", c.ran)
		}
	}
	if log.Count("already on the target, left alone") != 3 || log.Count(`"object":"app.accounts_balance"`, `"type":"INDEX"`) != 1 ||
		log.Count(`"index_builds":2`, `"others":2`, `"workers":4`) != 1 {
		t.Errorf("log:\n%s", &log)
	}
}

// TestBuildPostDataFails: a failing build stops the run with its own error
// (not the cancellation of the others), naming the entry and keeping the
// server's error; the rest does not run.
func TestBuildPostDataFails(t *testing.T) {
	for _, workers := range []int{1, 2} {
		target := &fakeTarget{fail: map[string]*pgconn.PgError{postData[2].SQL: {Severity: "ERROR", Code: "23505", Message: "could not create unique index"}}}
		err := BuildPostData(context.Background(), "", postData, workers, target.connect, zerolog.Nop())
		var entry *EntryError
		var pe *pgconn.PgError
		if !errors.As(err, &entry) || entry.Entry.Name != "accounts_balance" || !errors.As(err, &pe) || pe.Code != "23505" ||
			err.Error() != `--schema: creating index app.accounts_balance from pg_dump's post-data: ERROR: could not create unique index (SQLSTATE 23505)` {
			t.Errorf("workers %d: %v", workers, err)
		}
		for _, c := range target.conns {
			for _, sql := range c.ran {
				if strings.Contains(sql, "FOREIGN KEY") || strings.Contains(sql, "TRIGGER") {
					t.Errorf("workers %d: ran %q after a build failed", workers, sql)
				}
			}
		}
	}
}

// TestBuildPostDataCancelled: when the failing build's error arrives after
// the cancellation it caused in another worker, the failure is still the
// error returned. The failing connection closes only once the cancelled
// one has, so the cancellation is reported first.
func TestBuildPostDataCancelled(t *testing.T) {
	slow := Entry{Name: "big", Kind: "INDEX", Schema: "app", SQL: "CREATE INDEX big ON app.t (x);\n"}
	bad := Entry{Name: "t_key", Kind: "CONSTRAINT", Schema: "app", SQL: "ALTER TABLE app.t ADD UNIQUE (y);\n"}
	cancelled := make(chan struct{})
	connect := func(context.Context) (Execer, func(), error) {
		c := &fakeConn{fail: map[string]*pgconn.PgError{bad.SQL: {Severity: "ERROR", Code: "23505", Message: "could not create unique index"}},
			block: map[string]bool{slow.SQL: true}}
		return c, func() {
			if slices.Contains(c.ran, slow.SQL) {
				close(cancelled)
			} else {
				<-cancelled
			}
		}, nil
	}
	err := BuildPostData(context.Background(), "", []Entry{slow, bad}, 2, connect, zerolog.Nop())
	var entry *EntryError
	if !errors.As(err, &entry) || entry.Entry.Name != "t_key" || errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want the failure of t_key", err)
	}
}
