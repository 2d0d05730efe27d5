package protocol_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/testenv"
)

// replTestCtx bounds one integration test; nothing here should take long.
func replTestCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// startReplSource starts a source cluster that streams large transactions early.
func startReplSource(t *testing.T, version int) *testenv.Cluster {
	t.Helper()
	return testenv.NewCluster(t, testenv.Options{Version: version, Settings: map[string]string{
		// Streaming and spilling start at 64kB of decoded changes: the
		// smallest value, so that a few bigMessageSQL changes force them.
		"logical_decoding_work_mem": "64kB",
	}})
}

// sqlSession opens an SQL session on the source, closed at the test's end.
func sqlSession(t *testing.T, ctx context.Context, c *testenv.Cluster) *pgx.Conn {
	t.Helper()
	conn, err := c.Connect(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// replConnect opens a replication connection from an ordinary conn string.
func replConnect(t *testing.T, ctx context.Context, c *testenv.Cluster) *protocol.ReplConn {
	t.Helper()
	rc, err := protocol.ConnectReplication(ctx, c.ConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close(context.Background()) })
	return rc
}

func TestReplConnCommands(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		ctx := replTestCtx(t)
		src := startReplSource(t, version)
		rc := replConnect(t, ctx, src)

		if got := rc.ServerVersion(); got/10000 != version {
			t.Errorf("ServerVersion() = %d, want major %d", got, version)
		}
		sys, err := rc.IdentifySystem(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if sys.DBName != "postgres" || sys.Timeline != 1 || sys.XLogPos == 0 || strings.Trim(sys.SystemID, "0123456789") != "" || sys.SystemID == "" {
			t.Errorf("IdentifySystem = %+v", sys)
		}

		// A two-phase slot that exports nothing.
		info, err := rc.CreateSlot(ctx, "s_twophase", protocol.SlotOptions{TwoPhase: true, Snapshot: "nothing"})
		if err != nil {
			t.Fatal(err)
		}
		if info.Name != "s_twophase" || info.ConsistentPoint == 0 || info.SnapshotName != "" {
			t.Errorf("CreateSlot(two-phase, nothing) = %+v", info)
		}
		st, found, err := rc.Slot(ctx, "s_twophase")
		if err != nil || !found {
			t.Fatalf("Slot: %v, found %v", err, found)
		}
		if st.Plugin != "pgoutput" || st.SlotType != "logical" || st.Database != "postgres" || !st.TwoPhase || st.Active || st.Temporary ||
			st.ConfirmedFlush != info.ConsistentPoint || st.RestartLSN == 0 || st.RestartLSN > st.ConfirmedFlush {
			t.Errorf("Slot = %+v (created %+v)", st, info)
		}

		// export: a snapshot name comes back; the default slot is not two-phase.
		info, err = rc.CreateSlot(ctx, "s_export", protocol.SlotOptions{Snapshot: "export"})
		if err != nil {
			t.Fatal(err)
		}
		if info.SnapshotName == "" {
			t.Errorf("CreateSlot(export) returned no snapshot name: %+v", info)
		}
		if st, _, err := rc.Slot(ctx, "s_export"); err != nil || st.TwoPhase {
			t.Errorf("Slot(s_export) = %+v, %v; want two_phase false", st, err)
		}

		// use: only as the first command of a read-only repeatable read
		// transaction (PostgreSQL 18 insists on read-only),
		// whose snapshot then is the slot's.
		_, err = rc.CreateSlot(ctx, "s_use_outside", protocol.SlotOptions{Snapshot: "use"})
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || !strings.Contains(err.Error(), `create replication slot "s_use_outside"`) {
			t.Errorf("CreateSlot(use) outside a transaction: %v, want a server error with context", err)
		}
		if _, err := rc.PgConn().Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY").ReadAll(); err != nil {
			t.Fatal(err)
		}
		if _, err := rc.CreateSlot(ctx, "s_use", protocol.SlotOptions{Snapshot: "use"}); err != nil {
			t.Fatalf("CreateSlot(use) in a transaction: %v", err)
		}
		if _, err := rc.PgConn().Exec(ctx, "COMMIT").ReadAll(); err != nil {
			t.Fatal(err)
		}

		// Temporary slots end with their connection.
		rc2 := replConnect(t, ctx, src)
		if _, err := rc2.CreateSlot(ctx, "s_temp", protocol.SlotOptions{Temporary: true, Snapshot: "nothing"}); err != nil {
			t.Fatal(err)
		}
		if st, found, err := rc.Slot(ctx, "s_temp"); err != nil || !found || !st.Temporary || !st.Active {
			t.Errorf("Slot(s_temp) = %+v, %v, %v; want a temporary active slot", st, found, err)
		}
		rc2.Close(ctx)

		// Drop, then it is gone; dropping again is a clear error.
		if err := rc.DropSlot(ctx, "s_export", false); err != nil {
			t.Fatal(err)
		}
		if _, found, err := rc.Slot(ctx, "s_export"); err != nil || found {
			t.Errorf("Slot after DropSlot: found %v, %v", found, err)
		}
		err = rc.DropSlot(ctx, "s_export", true)
		if !errors.As(err, &pgErr) || pgErr.Code != "42704" || !strings.Contains(err.Error(), `drop replication slot "s_export"`) {
			t.Errorf("DropSlot of a missing slot: %v", err)
		}

		// Bad names never reach the server.
		for _, name := range []string{"Bad", "x; DROP", ""} {
			if _, err := rc.CreateSlot(ctx, name, protocol.SlotOptions{}); err == nil {
				t.Errorf("CreateSlot(%q) succeeded", name)
			}
		}
		if _, _, err := rc.Slot(ctx, "x' OR '1'='1"); err == nil {
			t.Error("Slot accepted an injection")
		}
	})
}

func TestReplConnStartErrors(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		ctx := replTestCtx(t)
		src := startReplSource(t, version)
		rc := replConnect(t, ctx, src)
		opts := protocol.StreamOptions{Publications: []string{"pub"}}

		// A missing slot is named.
		_, err := rc.StartReplication(ctx, "missing", 0, opts)
		if !errors.Is(err, protocol.ErrSlotNotFound) || !strings.Contains(err.Error(), `"missing"`) {
			t.Fatalf("StartReplication(missing) = %v", err)
		}

		// A two-phase slot sends prepared transactions to every client: not
		// asking for them is refused before the stream would break.
		if _, err := rc.CreateSlot(ctx, "s2pc", protocol.SlotOptions{TwoPhase: true, Snapshot: "nothing"}); err != nil {
			t.Fatal(err)
		}
		_, err = rc.StartReplication(ctx, "s2pc", 0, opts)
		if err == nil || !strings.Contains(err.Error(), `replication slot "s2pc" was created with two-phase decoding`) {
			t.Fatalf("StartReplication(two-phase slot) without two-phase = %v", err)
		}

		// The server's own refusal (the slot is in use) comes back as its
		// error, with context, and the connection stays usable.
		busy := replConnect(t, ctx, src)
		if _, err := busy.StartReplication(ctx, "s2pc", 0, protocol.StreamOptions{Publications: []string{"pub"}, TwoPhase: true}); err != nil {
			t.Fatal(err)
		}
		_, err = rc.StartReplication(ctx, "s2pc", 0, protocol.StreamOptions{Publications: []string{"pub"}, TwoPhase: true})
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "55006" || !strings.Contains(err.Error(), `start replication from slot "s2pc"`) {
			t.Fatalf("StartReplication of an active slot = %v, want the server's 55006", err)
		}
		if _, err := rc.IdentifySystem(ctx); err != nil {
			t.Fatalf("connection unusable after a failed START_REPLICATION: %v", err)
		}

		// What the server cannot do is refused before sending.
		if _, err := rc.CreateSlot(ctx, "s", protocol.SlotOptions{Snapshot: "nothing"}); err != nil {
			t.Fatal(err)
		}
		for _, o := range []protocol.StreamOptions{
			{Publications: []string{"pub"}, ProtoVersion: 5},
			{Publications: []string{"pub"}, ProtoVersion: 1, Streaming: "on"},
			{Publications: []string{"pub"}, ProtoVersion: 2, TwoPhase: true},
			{Publications: nil},
		} {
			if _, err := rc.StartReplication(ctx, "s", 0, o); err == nil || replPgError(err) != nil {
				t.Errorf("StartReplication(%+v) = %v, want a local error", o, err)
			}
		}
		_, err = rc.StartReplication(ctx, "s", 0, protocol.StreamOptions{Publications: []string{"pub"}, Streaming: "parallel"})
		if version < 16 {
			want := fmt.Sprintf(`protocol: streaming "parallel" needs PostgreSQL 16 or later (source is %s); use --streaming on`,
				fmt.Sprintf("%d.%d", rc.ServerVersion()/10000, rc.ServerVersion()%10000))
			if err == nil || err.Error() != want {
				t.Fatalf("parallel on %d: %v\nwant %s", version, err, want)
			}
			if !errors.Is(err, protocol.ErrUnsupported) {
				t.Errorf("errors.Is(ErrUnsupported) false for %v", err)
			}
			return
		}
		if err != nil {
			t.Fatalf("parallel on %d: %v", version, err)
		}
		// Streaming: other commands are refused, not sent.
		if _, err := rc.IdentifySystem(ctx); !errors.Is(err, protocol.ErrConnSpent) {
			t.Errorf("IdentifySystem while streaming = %v, want ErrConnSpent", err)
		}
	})
}

func replPgError(err error) *pgconn.PgError {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr
	}
	return nil
}
