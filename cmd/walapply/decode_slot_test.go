package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/testenv"
)

// TestDecodeTemporarySlot: --temporary-slot decodes from a slot that is
// gone when decode ends; --create-slot alone says the slot it made is
// permanent and how to drop it.
func TestDecodeTemporarySlot(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		src := testenv.NewPair(t, testenv.PairOptions{Version: version}).Source
		conn, err := src.Connect(ctx, "postgres")
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		testenv.MustExecConn(t, ctx, conn, "CREATE TABLE t (id int PRIMARY KEY)", "CREATE PUBLICATION pub FOR TABLE t")
		slots := func() string {
			var s string
			if err := conn.QueryRow(ctx, `SELECT coalesce(string_agg(slot_name || ' temporary=' || temporary, ','), '') FROM pg_replication_slots`).Scan(&s); err != nil {
				t.Fatal(err)
			}
			return s
		}
		base := []string{"--source", src.ConnString("postgres"), "--publication", "pub"}

		run := startDecode(t, ctx, append(base, "--slot", "peek", "--temporary-slot")...)
		run.waitStderr(t, ctx, "created temporary replication slot")
		if got := slots(); got != "peek temporary=true" {
			t.Errorf("slots while decoding with --temporary-slot: %q", got)
		}
		if _, err := conn.Exec(ctx, "INSERT INTO t VALUES (1)"); err != nil {
			t.Fatal(err)
		}
		run.waitFor(t, ctx, `"type":"insert"`)
		if err := run.stop(ctx); err != nil {
			t.Fatalf("decode --temporary-slot: %v\nstderr: %s", err, run.errOut)
		}
		t.Logf("stderr: %s", run.errOut)
		for deadline := time.Now().Add(10 * time.Second); slots() != "" && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
		}
		if got := slots(); got != "" {
			t.Errorf("slots after decode --temporary-slot ended: %q, want none", got)
		}

		run = startDecode(t, ctx, append(base, "--slot", "kept", "--create-slot")...)
		run.waitStderr(t, ctx, "created replication slot")
		if _, err := conn.Exec(ctx, "INSERT INTO t VALUES (2)"); err != nil {
			t.Fatal(err)
		}
		run.waitFor(t, ctx, `"type":"insert"`) // streaming: a stop now is a clean one
		if err := run.stop(ctx); err != nil {
			t.Fatalf("decode --create-slot: %v\nstderr: %s", err, run.errOut)
		}
		t.Logf("stderr: %s", run.errOut)
		want := `it is permanent and holds WAL on the source until dropped: SELECT pg_drop_replication_slot('kept');`
		if !strings.Contains(run.errOut.String(), want) {
			t.Errorf("decode --create-slot stderr %q lacks %q", run.errOut, want)
		}

		err = decodeMain(ctx, append(base, "--slot", "kept", "--temporary-slot"), &strings.Builder{}, &strings.Builder{})
		if err == nil || !strings.Contains(err.Error(), `replication slot "kept" exists, and --temporary-slot creates a new one`) {
			t.Errorf("--temporary-slot on an existing slot: %v", err)
		}
	})
}
