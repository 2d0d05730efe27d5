package apply_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/testenv"
)

// TestTopologyFanIn runs two sources into one target with two appliers side
// by side (different names, slots and replication origins), one of them
// reading two publications. The first runs as the walapply command (so the
// comma-separated --publication list and --origin go through the command
// line), the second in-process. Both sources write at the same time, also
// into a table they share with disjoint keys; afterwards the target holds
// exactly the union of what the sources hold, and each applier's progress
// is in its own origin.
func TestTopologyFanIn(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		cs := topoClusters(t, version, 3)
		s1, s2, tgt := cs[0], cs[1], cs[2]
		orders := `CREATE TABLE orders (id int PRIMARY KEY, source text NOT NULL, amount numeric NOT NULL)`
		customers := `CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL)`
		shipments := `CREATE TABLE shipments (id int PRIMARY KEY, order_id int NOT NULL)`
		testenv.MustExec(t, s1, "postgres", orders, customers,
			`CREATE PUBLICATION p_orders FOR TABLE orders`, `CREATE PUBLICATION p_customers FOR TABLE customers`)
		testenv.MustExec(t, s2, "postgres", orders, shipments, `CREATE PUBLICATION p_s2 FOR TABLE orders, shipments`)
		testenv.MustExec(t, tgt, "postgres", orders, customers, shipments)
		l1, l2 := topoLink(t, s1, tgt), topoLink(t, s2, tgt)
		l1.createSlot("from_s1")
		l2.createSlot("from_s2")
		// The first applier filters by origin where the source can: it
		// changes nothing here (nothing is replicated into s1), and shows
		// that appliers with different filters share a target, and that
		// --origin reaches the source from the command line.
		origin1 := "any"
		if version >= topoOriginVersion {
			origin1 = "none"
		}
		p1 := l1.applierProcess("from_s1", "p_orders,p_customers", "--name", "from_s1", "--origin", origin1)
		p1.start()
		l2.runApplier(topoConfig(l2, "from_s2", "any", "p_s2"))

		// Both sources at once: inserts, updates and deletes in many
		// transactions.
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		for _, w := range []struct {
			c    *testenv.Cluster
			name string
			base int
			more func(i int) []string
		}{
			{s1, "s1", 0, func(i int) []string {
				return []string{fmt.Sprintf(`INSERT INTO customers VALUES (%d, 'customer %d')`, i, i)}
			}},
			{s2, "s2", 1000, func(i int) []string {
				return []string{fmt.Sprintf(`INSERT INTO shipments VALUES (%d, %d)`, i, 1000+i)}
			}},
		} {
			wg.Go(func() {
				for i := 1; i <= 30; i++ {
					sqls := append([]string{
						fmt.Sprintf(`INSERT INTO orders SELECT %d + g, '%s', g * 1.5 FROM generate_series(%d, %d) g`, w.base, w.name, i*10-9, i*10),
						fmt.Sprintf(`UPDATE orders SET amount = amount + 1 WHERE id = %d`, w.base+i*10-9),
					}, w.more(i)...)
					if i%5 == 0 {
						sqls = append(sqls, fmt.Sprintf(`DELETE FROM orders WHERE id = %d`, w.base+i*10))
					}
					for _, q := range sqls {
						if err := w.c.Exec(context.Background(), q); err != nil {
							errs <- fmt.Errorf("on %s: %w", w.name, err)
							return
						}
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		topoSettle(topoSlot{l1, "from_s1"}, topoSlot{l2, "from_s2"})
		p1.stop()

		for _, c := range []struct {
			q       string
			sources []*testenv.Cluster
		}{
			{`SELECT (id, source, amount)::text FROM orders`, []*testenv.Cluster{s1, s2}},
			{`SELECT (id, name)::text FROM customers`, []*testenv.Cluster{s1}},
			{`SELECT (id, order_id)::text FROM shipments`, []*testenv.Cluster{s2}},
		} {
			var src []string
			for _, s := range c.sources {
				src = append(src, topoRows(t, s, c.q)...)
			}
			if len(src) == 0 {
				t.Fatalf("%s: the sources hold no rows", c.q)
			}
			topoExpect(t, tgt, "target, "+c.q, c.q, src)
		}
		if n := len(topoRows(t, tgt, `SELECT id::text FROM orders`)); n != 2*(300-6) {
			t.Errorf("the target holds %d orders, want %d (300 written and 6 deleted on each source)", n, 2*(300-6))
		}
		// Each applier's progress lives in its own origin, at its own
		// source's position.
		for _, l := range []struct {
			h          *harness
			name, slot string
		}{{l1, "walapply_from_s1", "from_s1"}, {l2, "walapply_from_s2", "from_s2"}} {
			progress := topoRows(t, tgt, fmt.Sprintf(`SELECT coalesce(pg_replication_origin_progress('%s', true)::text, 'none')`, l.name))
			confirmed := topoRows(t, l.h.pair.Source, fmt.Sprintf(`SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = '%s'`, l.slot))
			if len(progress) != 1 || progress[0] == "none" {
				t.Errorf("origin %s on the target: progress %q", l.name, progress)
				continue
			}
			// The origin holds the end of the last applied transaction;
			// the slot may have confirmed further (WAL without published
			// changes), never less.
			ok := topoRows(t, l.h.pair.Source, fmt.Sprintf(`SELECT ('%s'::pg_lsn <= '%s'::pg_lsn)::text`, progress[0], confirmed[0]))
			if ok[0] != "true" {
				t.Errorf("origin %s is at %s on the target, beyond what slot %s confirmed (%s)", l.name, progress[0], l.slot, confirmed[0])
			}
		}
	})
}

// TestTopologyFanInPreparedSameGID: two sources into one target, each with
// a transaction prepared under the same GID at the same time. Both must be
// prepared on the target side by side (target GIDs are per applier), then
// one committed and one rolled back on its source, each with its own
// outcome on the target.
func TestTopologyFanInPreparedSameGID(t *testing.T) {
	t.Parallel()
	probe := apply.Config{Source: "host=127.0.0.1 port=1 dbname=postgres", Target: "host=127.0.0.1 port=1 dbname=postgres",
		Slot: "probe", Publications: []string{"p"}, TwoPhase: true}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // validation only: Run returns at once
	if err := apply.Run(ctx, probe); errors.Is(err, apply.ErrNotSupported) {
		t.Skipf("two-phase apply (--two-phase, issue 5) is not available in this build yet: %v", err)
	}
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		cs := topoClusters(t, version, 3)
		s1, s2, tgt := cs[0], cs[1], cs[2]
		orders := `CREATE TABLE orders (id int PRIMARY KEY, source text NOT NULL)`
		for _, c := range cs {
			testenv.MustExec(t, c, "postgres", orders)
		}
		testenv.MustExec(t, s1, "postgres", `CREATE PUBLICATION pub FOR TABLE orders`)
		testenv.MustExec(t, s2, "postgres", `CREATE PUBLICATION pub FOR TABLE orders`)
		l1, l2 := topoLink(t, s1, tgt), topoLink(t, s2, tgt)
		for _, l := range []struct {
			h    *harness
			slot string
		}{{l1, "from_s1"}, {l2, "from_s2"}} {
			l.h.source(fmt.Sprintf(`SELECT pg_create_logical_replication_slot('%s', 'pgoutput', false, true)`, l.slot))
			cfg := topoConfig(l.h, l.slot, "", "pub")
			cfg.TwoPhase = true
			l.h.runApplier(cfg)
		}
		settle := func() { t.Helper(); topoSettle(topoSlot{l1, "from_s1"}, topoSlot{l2, "from_s2"}) }

		testenv.MustExec(t, s1, "postgres", `BEGIN`, `INSERT INTO orders VALUES (1, 's1'), (2, 's1')`, `PREPARE TRANSACTION 'same_gid'`)
		testenv.MustExec(t, s2, "postgres", `BEGIN`, `INSERT INTO orders VALUES (1001, 's2')`, `PREPARE TRANSACTION 'same_gid'`)
		settle()
		prepared := topoRows(t, tgt, `SELECT gid FROM pg_prepared_xacts WHERE database = current_database()`)
		if len(prepared) != 2 {
			t.Fatalf("the target has %d prepared transactions (%q), want 2: one per source", len(prepared), prepared)
		}
		t.Logf("PostgreSQL %d: GID 'same_gid' prepared on both sources is prepared on the target as %q", version, prepared)
		topoExpect(t, tgt, "target orders while prepared", `SELECT (id, source)::text FROM orders`, nil)

		testenv.MustExec(t, s1, "postgres", `COMMIT PREPARED 'same_gid'`)
		testenv.MustExec(t, s2, "postgres", `ROLLBACK PREPARED 'same_gid'`)
		settle()
		topoExpect(t, tgt, "target prepared transactions at the end", `SELECT gid FROM pg_prepared_xacts WHERE database = current_database()`, nil)
		topoExpect(t, tgt, "target orders", `SELECT (id, source)::text FROM orders`, []string{"(1,s1)", "(2,s1)"})
	})
}
