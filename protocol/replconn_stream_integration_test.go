package protocol_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/testenv"
)

// receiveDecoded returns the next decoded pgoutput message, skipping
// keepalives, and the XLogData's WAL start.
func receiveDecoded(t *testing.T, ctx context.Context, s *protocol.ReplStream, dec *protocol.Decoder) (protocol.Message, protocol.LSN) {
	t.Helper()
	var ev protocol.StreamEvent
	for {
		if err := s.Receive(ctx, &ev); err != nil {
			t.Fatalf("Receive: %v", err)
		}
		if ev.Kind != protocol.EventXLogData {
			continue
		}
		m, err := dec.Decode(ev.Data)
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		return m, ev.WALStart
	}
}

// TestReplStream streams a transaction, confirms it, and checks timeouts,
// cancellation and a server-side error.
func TestReplStream(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		ctx := replTestCtx(t)
		src := startReplSource(t, version)
		sql := sqlSession(t, ctx, src)
		testenv.MustExecConn(t, ctx, sql,
			"CREATE TABLE t (id int PRIMARY KEY, v text)",
			"CREATE PUBLICATION pub FOR TABLE t")
		admin := replConnect(t, ctx, src)
		slot, err := admin.CreateSlot(ctx, "s", protocol.SlotOptions{Snapshot: "nothing"})
		if err != nil {
			t.Fatal(err)
		}
		testenv.MustExecConn(t, ctx, sql, "INSERT INTO t VALUES (1, 'one'), (2, 'two')")

		rc := replConnect(t, ctx, src)
		s, err := rc.StartReplication(ctx, "s", 0, protocol.StreamOptions{Publications: []string{"pub"}})
		if err != nil {
			t.Fatal(err)
		}
		wantProto := 4 // the highest the server has
		if version == 15 {
			wantProto = 3
		}
		if got := s.DecoderOptions(); got.ProtoVersion != wantProto || got.StreamingParallel {
			t.Errorf("DecoderOptions = %+v for PostgreSQL %d", got, version)
		}
		dec, err := protocol.NewDecoder(s.DecoderOptions())
		if err != nil {
			t.Fatal(err)
		}
		var begin protocol.Begin
		var commit protocol.Commit
		var ids []string
		for done := false; !done; {
			m, walStart := receiveDecoded(t, ctx, s, dec)
			switch m := m.(type) {
			case *protocol.Begin:
				begin = *m
				if walStart < slot.ConsistentPoint {
					t.Errorf("Begin at %s, before the slot's consistent point %s", walStart, slot.ConsistentPoint)
				}
			case *protocol.Relation:
				if m.Name != "t" || m.Namespace != "public" || len(m.Columns) != 2 {
					t.Errorf("Relation = %+v", m)
				}
			case *protocol.Insert:
				ids = append(ids, string(m.New.Columns[0].Data))
			case *protocol.Commit:
				commit = *m
				done = true
			default:
				t.Fatalf("unexpected %s", m.Type())
			}
		}
		if begin.FinalLSN != commit.CommitLSN || commit.EndLSN <= commit.CommitLSN || len(ids) != 2 || ids[0] != "1" || ids[1] != "2" {
			t.Fatalf("begin %+v commit %+v ids %v", begin, commit, ids)
		}

		// Nothing more is pending: a short deadline times out (after any
		// keepalives) and leaves the stream usable.
		var ev protocol.StreamEvent
		untilTimeout := func(what string, receive func() error) {
			for i := 0; i < 50; i++ {
				err := receive()
				switch {
				case protocol.IsTimeout(err):
					if !errors.Is(err, protocol.ErrReceiveTimeout) || !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("%s: timeout error %v does not match both sentinels", what, err)
					}
					return
				case err != nil:
					t.Fatalf("%s with a short deadline: %v", what, err)
				case ev.Kind != protocol.EventKeepalive:
					t.Fatalf("%s: unexpected event %+v", what, ev)
				}
			}
			t.Fatalf("%s: no timeout in 50 tries", what)
		}
		untilTimeout("Receive", func() error {
			short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			return s.Receive(short, &ev)
		})
		// ReceiveBefore's own deadline times out the same way on a context
		// without one, and an earlier context deadline wins over it.
		untilTimeout("ReceiveBefore", func() error {
			return s.ReceiveBefore(ctx, time.Now().Add(50*time.Millisecond), &ev)
		})
		short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
		for err := error(nil); !protocol.IsTimeout(err); {
			err = s.ReceiveBefore(short, time.Now().Add(time.Hour), &ev)
			if err != nil && !protocol.IsTimeout(err) {
				t.Fatalf("ReceiveBefore with a short context: %v", err)
			}
		}
		cancelShort()

		// A canceled context interrupts a blocked Receive; the stream
		// still works afterwards.
		cctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() { errc <- s.Receive(cctx, &ev) }()
		time.Sleep(50 * time.Millisecond) // let it block; the outcome does not depend on it
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) && err != nil {
			t.Fatalf("Receive after cancel = %v", err)
		}

		// Confirm the transaction: confirmed_flush_lsn moves to its end. The
		// walsender answers reply-requested with a keepalive after it
		// processed the update, so reading the slot afterwards is not racy.
		if err := s.SendStatus(ctx, commit.EndLSN, commit.EndLSN, commit.EndLSN, true); err != nil {
			t.Fatal(err)
		}
		for {
			if err := s.Receive(ctx, &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Kind == protocol.EventKeepalive {
				break
			}
		}
		st, _, err := admin.Slot(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		if st.ConfirmedFlush != commit.EndLSN || !st.Active {
			t.Errorf("after SendStatus(%s): slot %+v", commit.EndLSN, st)
		}

		// A write position ahead of flush does not confirm it.
		testenv.MustExecConn(t, ctx, sql, "INSERT INTO t VALUES (3, 'three')")
		var c2 protocol.Commit
		for {
			if m, _ := receiveDecoded(t, ctx, s, dec); m.Type() == protocol.MessageTypeCommit {
				c2 = *m.(*protocol.Commit)
				break
			}
		}
		if err := s.SendStatus(ctx, c2.EndLSN, commit.EndLSN, commit.EndLSN, true); err != nil {
			t.Fatal(err)
		}
		for ev.Kind = 0; ev.Kind != protocol.EventKeepalive; {
			if err := s.Receive(ctx, &ev); err != nil {
				t.Fatal(err)
			}
		}
		if st, _, _ := admin.Slot(ctx, "s"); st.ConfirmedFlush != commit.EndLSN {
			t.Errorf("write %s with flush %s moved the slot to %s", c2.EndLSN, commit.EndLSN, st.ConfirmedFlush)
		}

		// The server ends the stream with an error: a *pgconn.PgError.
		testenv.MustExecConn(t, ctx, sql, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = 's'")
		var err2 error
		for err2 == nil {
			err2 = s.Receive(ctx, &ev)
		}
		var pgErr *pgconn.PgError
		if !errors.As(err2, &pgErr) || pgErr.Code != "57P01" {
			t.Fatalf("Receive after pg_terminate_backend = %v, want a PgError 57P01", err2)
		}
		if err := s.Receive(ctx, &ev); err == nil {
			t.Error("Receive after the stream ended succeeded")
		}
		if _, err := rc.IdentifySystem(ctx); !errors.Is(err, protocol.ErrConnSpent) {
			t.Errorf("IdentifySystem on a spent connection = %v", err)
		}
	})
}

// TestReceiveDoesNotAllocate receives a backlog of small messages and counts
// allocations per Receive.
func TestReceiveDoesNotAllocate(t *testing.T) {
	vs, err := testenv.Versions()
	if err != nil {
		t.Fatal(err)
	}
	version := vs[len(vs)-1]
	ctx := replTestCtx(t)
	src := startReplSource(t, version)
	sql := sqlSession(t, ctx, src)
	testenv.MustExecConn(t, ctx, sql, "CREATE TABLE t (id int PRIMARY KEY)", "CREATE PUBLICATION pub FOR TABLE t")
	rc := replConnect(t, ctx, src)
	if _, err := rc.CreateSlot(ctx, "s", protocol.SlotOptions{Snapshot: "nothing"}); err != nil {
		t.Fatal(err)
	}
	testenv.MustExecConn(t, ctx, sql, "INSERT INTO t SELECT generate_series(1, 2000)")
	s, err := rc.StartReplication(ctx, "s", 0, protocol.StreamOptions{Publications: []string{"pub"}})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var ev protocol.StreamEvent
	check := func(what string, runs int, receive func() error) {
		n := 0
		allocs := testing.AllocsPerRun(runs, func() {
			if err := receive(); err != nil {
				t.Fatal(err)
			}
			if ev.Kind == protocol.EventXLogData {
				n++
			}
		})
		if n < runs {
			t.Fatalf("%s: only %d XLogData messages", what, n)
		}
		if allocs != 0 {
			t.Errorf("%s allocates %.2f times per message", what, allocs)
		}
	}
	check("Receive", 1000, func() error { return s.Receive(rctx, &ev) })
	// The run loop's way: a long-lived context and a deadline that moves.
	check("ReceiveBefore", 800, func() error { return s.ReceiveBefore(ctx, time.Now().Add(time.Minute), &ev) })
}
