package walapplytc_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/walapply/walapply/apply"
	walapplytc "github.com/walapply/walapply/contrib/testcontainers"
)

// A user's test: replicate one table between two containers. Without a
// Docker engine it is skipped, saying why.
func TestPairReplicates(t *testing.T) {
	ctx := context.Background()
	pair := walapplytc.NewPair(t, walapplytc.Options{})
	for _, url := range []string{pair.SourceURL, pair.TargetURL} {
		exec(t, url, "CREATE TABLE items (id int PRIMARY KEY, name text)")
	}
	exec(t, pair.SourceURL, "CREATE PUBLICATION items_pub FOR TABLE items")

	r, err := apply.Start(ctx, apply.Config{Source: pair.SourceURL, Target: pair.TargetURL,
		Slot: "items", CreateSlot: true, Publications: []string{"items_pub"}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	exec(t, pair.SourceURL, "INSERT INTO items SELECT g, 'item ' || g FROM generate_series(1, 100) g")
	exec(t, pair.SourceURL, "UPDATE items SET name = 'changed' WHERE id % 10 = 0")
	if err := r.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	src, dst := rows(t, pair.SourceURL), rows(t, pair.TargetURL)
	if len(src) != 100 || !slices.Equal(src, dst) {
		t.Fatalf("the target differs from the source:\nsource %q\ntarget %q", src, dst)
	}
}

// The helper's settings and the extra ones become postgres arguments.
func TestServerArgs(t *testing.T) {
	got := walapplytc.ServerArgs(map[string]string{"fsync": "on", "logical_decoding_work_mem": "64kB"})
	want := []string{"-c", "fsync=on", "-c", "logical_decoding_work_mem=64kB", "-c", "max_prepared_transactions=20",
		"-c", "max_replication_slots=20", "-c", "max_wal_senders=20", "-c", "wal_level=logical"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

func Example() {
	// In a test: pair := walapplytc.NewPair(t, walapplytc.Options{}), which
	// skips without Docker and terminates the containers at the end.
	ctx := context.Background()
	pair, err := walapplytc.StartPair(ctx, walapplytc.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pair.Terminate(ctx)
	// ... create the schema on both, a publication on the source ...
	r, err := apply.Start(ctx, apply.Config{Source: pair.SourceURL, Target: pair.TargetURL,
		Slot: "app", CreateSlot: true, Publications: []string{"app"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Stop()
	// ... write on the source ...
	if err := r.WaitCaughtUp(ctx); err != nil {
		fmt.Println(err)
	}
	// ... the target now has everything the source had committed.
}
