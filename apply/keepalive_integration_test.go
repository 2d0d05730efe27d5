package apply_test

import (
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/walapply/walapply/internal/testutil"
	"github.com/walapply/walapply/testenv"
)

// TestLongTargetStatement: a target statement that takes longer than the
// source's wal_sender_timeout must not make the source drop the stream
// (the applier would then start the transaction over, for ever).
func TestLongTargetStatement(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := newHarness(t, version, map[string]string{"wal_sender_timeout": "3s"}, nil)
		h.both(`CREATE TABLE slow (id int PRIMARY KEY)`)
		h.source(`CREATE PUBLICATION pub FOR TABLE slow`)
		// An ALWAYS trigger fires on the replica session too: each insert
		// takes 8 seconds on the target.
		h.target(`CREATE FUNCTION nap() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(8); RETURN NEW; END $$`,
			`CREATE TRIGGER nap BEFORE INSERT ON slow FOR EACH ROW EXECUTE FUNCTION nap()`,
			`ALTER TABLE slow ENABLE ALWAYS TRIGGER nap`)
		h.createSlot("slow")
		h.source(`INSERT INTO slow VALUES (1)`)
		start := time.Now()
		cfg := h.config("slow", "pub")
		var log testutil.LogBuffer
		cfg.Logger = zerolog.New(zerolog.MultiLevelWriter(zerolog.NewTestWriter(t), &log))
		stop := h.runApplier(cfg)
		h.waitCaughtUp("slow", 2*time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		h.expect(tableRows("slow", ""), "(1)")
		if d := time.Since(start); d > 40*time.Second {
			t.Errorf("took %s: the stream was most likely dropped and the transaction applied again", d)
		}
		if strings.Contains(log.String(), "reconnecting") {
			t.Error("the source dropped the stream during the long statement")
		}
	})
}
