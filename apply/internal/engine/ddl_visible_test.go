package engine

import (
	"context"
	"testing"
	"time"

	"github.com/walapply/walapply/testenv"
)

// TestWaitVisible: waitVisible says a source transaction has ended only
// once a new snapshot no longer sees it running, from its 32-bit xid (the
// full xid is rebuilt from the snapshot's xmax).
func TestWaitVisible(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		if version < 14 {
			t.Skip("--ddl needs PostgreSQL 14+")
		}
		c := testenv.NewCluster(t, testenv.Options{Version: version})
		ctx := context.Background()
		open, err := c.Connect(ctx, "postgres")
		if err != nil {
			t.Fatal(err)
		}
		defer open.Close(ctx)
		asker, err := c.Connect(ctx, "postgres")
		if err != nil {
			t.Fatal(err)
		}
		defer asker.Close(ctx)
		// Move the epoch-free part of the counter along a little, so that
		// the xid is not the first one.
		var done int64
		if err := asker.QueryRow(ctx, `SELECT txid_current()`).Scan(&done); err != nil {
			t.Fatal(err)
		}
		tx, err := open.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var running int64
		if err := tx.QueryRow(ctx, `SELECT txid_current()`).Scan(&running); err != nil {
			t.Fatal(err)
		}
		if ok, err := waitVisible(ctx, asker, uint32(done), time.Second); err != nil || !ok {
			t.Fatalf("committed transaction %d: visible %v, %v; want true", done, ok, err)
		}
		if ok, err := waitVisible(ctx, asker, uint32(running), 50*time.Millisecond); err != nil || ok {
			t.Fatalf("running transaction %d: visible %v, %v; want false", running, ok, err)
		}
		go func() { time.Sleep(100 * time.Millisecond); _ = tx.Commit(context.Background()) }()
		if ok, err := waitVisible(ctx, asker, uint32(running), time.Minute); err != nil || !ok {
			t.Fatalf("transaction %d after its commit: visible %v, %v; want true", running, ok, err)
		}
	})
}
