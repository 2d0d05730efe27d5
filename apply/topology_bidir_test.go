package apply_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/walapply/walapply/testenv"
)

// topoBidirSchema is created on both sides of A ↔ B. events has no key on
// purpose: a change that went round the loop would show as a second row
// there instead of stopping the applier with a duplicate-key error.
var topoBidirSchema = []string{
	`CREATE TABLE items (id int PRIMARY KEY, made_on text NOT NULL, v int NOT NULL)`,
	`CREATE TABLE events (made_on text NOT NULL, n int NOT NULL)`,
	`CREATE PUBLICATION pub FOR TABLE items, events`,
}

// TestTopologyBidirectional runs A ↔ B: an applier from A into B and one
// from B into A, both with origin = none, so each sends only the changes
// made on its own source. Rows written on either side appear exactly once
// on the other and are not sent back; updates and deletes on both sides to
// different rows converge; after a quiet period nothing has moved and every
// slot has confirmed its source's current WAL position.
func TestTopologyBidirectional(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		topoSkipBefore16(t, version)
		cs := topoClusters(t, version, 2)
		a, b := cs[0], cs[1]
		ab, ba := topoLink(t, a, b), topoLink(t, b, a)
		testenv.MustExec(t, a, "postgres", topoBidirSchema...)
		testenv.MustExec(t, b, "postgres", topoBidirSchema...)
		ab.createSlot("a_to_b")
		ba.createSlot("b_to_a")
		ab.runApplier(topoConfig(ab, "a_to_b", "none", "pub"))
		ba.runApplier(topoConfig(ba, "b_to_a", "none", "pub"))
		settle := func() { t.Helper(); topoSettle(topoSlot{ab, "a_to_b"}, topoSlot{ba, "b_to_a"}) }

		// want is the expected content of both sides, kept in step with
		// every write below.
		items := map[int]string{} // id → "made_on,v"
		var events []string
		check := func(step string) {
			t.Helper()
			var wantItems []string
			for id, rest := range items {
				wantItems = append(wantItems, fmt.Sprintf("(%d,%s)", id, rest))
			}
			for _, c := range []struct {
				name string
				c    *testenv.Cluster
			}{{"A", a}, {"B", b}} {
				topoExpect(t, c.c, step+": items on "+c.name, "SELECT (id, made_on, v)::text FROM items", wantItems)
				topoExpect(t, c.c, step+": events on "+c.name, "SELECT (made_on, n)::text FROM events", events)
			}
		}

		// A row written on A appears once on B, and is not sent back.
		testenv.MustExec(t, a, "postgres",
			`INSERT INTO items SELECT g, 'a', 0 FROM generate_series(1, 50) g`,
			`INSERT INTO events SELECT 'a', g FROM generate_series(1, 50) g`)
		for id := 1; id <= 50; id++ {
			items[id] = "a,0"
			events = append(events, fmt.Sprintf("(a,%d)", id))
		}
		settle()
		check("after inserts on A")

		// And the other way round.
		testenv.MustExec(t, b, "postgres",
			`INSERT INTO items SELECT g, 'b', 0 FROM generate_series(101, 150) g`,
			`INSERT INTO events SELECT 'b', g FROM generate_series(101, 150) g`)
		for id := 101; id <= 150; id++ {
			items[id] = "b,0"
			events = append(events, fmt.Sprintf("(b,%d)", id))
		}
		settle()
		check("after inserts on B")

		// Both sides at once, each to its own rows (some made on the other
		// side): updates, deletes and inserts in several transactions.
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		for _, side := range []struct {
			c                      *testenv.Cluster
			name                   string
			lo, hi, dlo, dhi, base int
		}{{a, "a", 1, 25, 101, 105, 200}, {b, "b", 26, 50, 146, 150, 300}} {
			wg.Go(func() {
				var sqls []string
				for round := 1; round <= 5; round++ {
					sqls = append(sqls,
						fmt.Sprintf(`UPDATE items SET v = v + 1 WHERE id BETWEEN %d AND %d`, side.lo, side.hi),
						fmt.Sprintf(`UPDATE items SET v = v + 10 WHERE id BETWEEN %d AND %d`, side.lo+100, side.hi+100),
						fmt.Sprintf(`INSERT INTO items VALUES (%d, '%s', %d)`, side.base+round, side.name, round),
						fmt.Sprintf(`INSERT INTO events VALUES ('%s', %d)`, side.name, side.base+round))
				}
				sqls = append(sqls, fmt.Sprintf(`DELETE FROM items WHERE id BETWEEN %d AND %d`, side.dlo, side.dhi))
				for _, q := range sqls {
					if err := side.c.Exec(context.Background(), q); err != nil {
						errs <- fmt.Errorf("on %s: %s: %w", side.name, q, err)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for _, s := range []struct {
			name                   string
			lo, hi, dlo, dhi, base int
		}{{"a", 1, 25, 101, 105, 200}, {"b", 26, 50, 146, 150, 300}} {
			for id := s.lo; id <= s.hi; id++ {
				items[id] = "a,5"
			}
			for id := s.lo + 100; id <= s.hi+100; id++ {
				items[id] = "b,50"
			}
			for id := s.dlo; id <= s.dhi; id++ {
				delete(items, id)
			}
			for round := 1; round <= 5; round++ {
				items[s.base+round] = fmt.Sprintf("%s,%d", s.name, round)
				events = append(events, fmt.Sprintf("(%s,%d)", s.name, s.base+round))
			}
		}
		settle()
		check("after concurrent changes on both sides")

		// A quiet period: a change going round in circles would keep
		// writing. Nothing may have moved, and both slots are still (or
		// again) at their source's current position.
		time.Sleep(time.Second)
		settle()
		check("after a quiet period")
	})
}

// TestTopologyBidirectionalLoopControl is the control for the test above:
// with origin = any on both sides (what every version before 16 does), a row
// written on A comes back to A through B. It shows that the rows the test
// above checks would reveal a loop if origin = none did not break it.
func TestTopologyBidirectionalLoopControl(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		cs := topoClusters(t, version, 2)
		a, b := cs[0], cs[1]
		ab, ba := topoLink(t, a, b), topoLink(t, b, a)
		testenv.MustExec(t, a, "postgres", topoBidirSchema...)
		testenv.MustExec(t, b, "postgres", topoBidirSchema...)
		ab.createSlot("a_to_b")
		ba.createSlot("b_to_a")
		stopAB := ab.runApplier(topoConfig(ab, "a_to_b", "any", "pub"))
		stopBA := ba.runApplier(topoConfig(ba, "b_to_a", "", "pub")) // "" is any
		testenv.MustExec(t, a, "postgres", `INSERT INTO events VALUES ('a', 1)`)
		deadline := time.Now().Add(topoCatchUp)
		for {
			n := len(topoRows(t, a, `SELECT n::text FROM events WHERE made_on = 'a' AND n = 1`))
			if n >= 2 {
				t.Logf("PostgreSQL %d, origin = any both ways: the row written once on A is on A %d times", version, n)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("with origin = any both ways the row written on A never came back to A (%d copies): the loop the origin = none test guards against did not happen", n)
			}
			time.Sleep(20 * time.Millisecond)
		}
		for _, stop := range []func() error{stopAB, stopBA} {
			if err := stop(); err != nil {
				t.Errorf("stopping an applier: %v", err)
			}
		}
		if rows := topoRows(t, b, `SELECT made_on FROM events`); !slices.Contains(rows, "a") {
			t.Errorf("B has no copy of the row: %q", rows)
		}
	})
}
