package testenv_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/walapply/walapply/testenv"
)

// A cluster outside a test: Start and Close it yourself. (It prints
// "logical 64kB"; not checked as an example's output, which would start a
// server under -short too: TestCluster checks the same.)
func ExampleStart() {
	ctx := context.Background()
	c, err := testenv.Start(ctx, testenv.Options{
		Settings: map[string]string{"logical_decoding_work_mem": "64kB"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	conn, err := c.Connect(ctx, "postgres")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)
	var walLevel, workMem string
	err = conn.QueryRow(ctx, "SELECT current_setting('wal_level'), current_setting('logical_decoding_work_mem')").Scan(&walLevel, &workMem)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(walLevel, workMem)
}

// In a test, NewPair starts a source and a target and closes them when the
// test ends; ForEachVersion repeats the test for every version selected by
// WALAPPLY_TEST_PG.
func ExampleNewPair() {
	testReplication := func(t *testing.T) {
		testenv.ForEachVersion(t, func(t *testing.T, version int) {
			pair := testenv.NewPair(t, testenv.PairOptions{
				Version: version,
				// Make the source stream large transactions early.
				SourceSettings: map[string]string{"logical_decoding_work_mem": "64kB"},
			})
			ctx := context.Background()
			if err := pair.Source.Exec(ctx, "CREATE TABLE t (id int PRIMARY KEY)"); err != nil {
				t.Fatal(err)
			}
			// Replicate from pair.Source.ReplicationConnString("postgres")
			// to pair.Target.ConnString("postgres"), then compare.
		})
	}
	_ = testReplication
}
