package registry

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/rs/zerolog"
	"github.com/walapply/walapply/protocol"
)

// fakeConn answers the registry's queries from what the target holds: the
// applier's row (if any) and the origin's progress, and records the
// statements it executes.
type fakeConn struct {
	row      []any  // slot_name, confirmed_lsn, copying; nil: no row
	progress string // the origin's progress; "": no origin
	execs    []string
}

type fakeRow struct {
	vals []any
	err  error
}

func (r fakeRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	for i, d := range dest {
		switch d := d.(type) {
		case *string:
			*d = r.vals[i].(string)
		case *bool:
			*d = r.vals[i].(bool)
		case **string:
			s := r.vals[i].(string)
			*d = &s
		}
	}
	return nil
}

func (c *fakeConn) QueryRow(_ context.Context, sql string, _ ...any) pgx.Row {
	switch {
	case strings.Contains(sql, "FROM walapply.appliers"):
		if c.row == nil {
			return fakeRow{err: pgx.ErrNoRows}
		}
		return fakeRow{vals: c.row}
	case strings.Contains(sql, "pg_replication_origin_progress"):
		if c.progress == "" {
			return fakeRow{err: pgx.ErrNoRows}
		}
		return fakeRow{vals: []any{c.progress}}
	case strings.Contains(sql, "current_database"):
		return fakeRow{vals: []any{"target"}}
	}
	return fakeRow{err: errors.New("unexpected query: " + sql)}
}

func (c *fakeConn) Exec(_ context.Context, sql string, _ ...any) (pgconn.CommandTag, error) {
	c.execs = append(c.execs, strings.Fields(sql)[0])
	if strings.Contains(sql, "slot_name = $4") {
		c.execs[len(c.execs)-1] += " slot"
	}
	return pgconn.CommandTag{}, nil
}

// TestRegister covers each decision of Register: a new applier recorded,
// or refused for an origin with progress; a known one's start recorded,
// rebound to a new slot when it holds nothing of the old one, refused
// otherwise.
func TestRegister(t *testing.T) {
	cases := []struct {
		name     string
		row      []any
		progress string
		want     error
		execs    string
	}{
		{name: "new applier", execs: "INSERT"},
		{name: "new applier, origin of another", progress: "0/10", want: ErrOriginTaken},
		{name: "new applier, origin without progress", progress: "0/0", execs: "INSERT"},
		{name: "known applier, same slot", row: []any{"s1", "0/20", false}, progress: "0/20", execs: "UPDATE"},
		{name: "other slot, nothing streamed", row: []any{"old", "0/0", false}, execs: "UPDATE slot"},
		{name: "other slot, confirmed", row: []any{"old", "0/5", false}, want: ErrWrongSlot},
		{name: "other slot, origin progress", row: []any{"old", "0/0", false}, progress: "0/5", want: ErrWrongSlot},
		{name: "other slot, copying", row: []any{"old", "0/0", true}, want: ErrWrongSlot},
	}
	for _, c := range cases {
		conn := &fakeConn{row: c.row, progress: c.progress}
		a := Applier{Name: "a", Slot: "s1", Publications: []string{"p"}, Origin: "walapply_a"}
		err := Register(context.Background(), conn, a, protocol.SystemInfo{SystemID: "1", Timeline: 1}, zerolog.Nop())
		if !errors.Is(err, c.want) || (c.want == nil && err != nil) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
		if got := strings.Join(conn.execs, ","); got != c.execs {
			t.Errorf("%s: executed %q, want %q", c.name, got, c.execs)
		}
	}
}
