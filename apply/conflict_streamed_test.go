package apply_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/testenv"
)

// TestConflictPoliciesStreamed: a streamed transaction replayed from its
// spill file keeps the insert_exists policy in a long run of inserts (a
// run that would otherwise go as one COPY, which can neither skip nor
// overwrite the target's row).
func TestConflictPoliciesStreamed(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		for _, policy := range []string{"skip", "apply"} {
			t.Run(policy, func(t *testing.T) {
				h := newHarness(t, version, map[string]string{"logical_decoding_work_mem": "64kB"}, nil)
				h.both(`CREATE TABLE ie (id int PRIMARY KEY, v text)`)
				h.source(`CREATE PUBLICATION pub FOR TABLE ie`)
				h.target(`INSERT INTO ie VALUES (500, 'target')`)
				h.createSlot("cs")
				cfg := h.config("cs", "pub")
				cfg.Streaming = "on"
				var err error
				if cfg.Conflicts, err = apply.ParseConflictPolicies("insert_exists=" + policy); err != nil {
					t.Fatal(err)
				}
				stop := h.runApplier(cfg)
				// 2,000 rows of about 100 bytes: past 64 kB, so streamed.
				h.source(`INSERT INTO ie SELECT g, 'source ' || repeat('x', 90) FROM generate_series(1, 2000) g`)
				h.waitCaughtUp("cs", time.Minute)
				if err := stop(); err != nil {
					t.Fatal(err)
				}
				want := "target"
				if policy == "apply" {
					want = "source"
				}
				h.expect(`SELECT count(*) FROM ie`, "2000")
				h.expect(`SELECT split_part(v, ' ', 1) FROM ie WHERE id = 500`, want)
				h.expect(fmt.Sprintf(`SELECT count(*) FROM walapply.conflicts WHERE kind = 'insert_exists' AND resolution = '%s'`, map[string]string{"skip": "skipped", "apply": "applied"}[policy]), "1")
			})
		}
	})
}
