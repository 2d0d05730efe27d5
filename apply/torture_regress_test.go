//go:build linux

package apply

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
	"github.com/walapply/walapply/internal/faultproxy"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/testenv"
)

// TestTortureLostTargetAtTwoPhaseCheck is a regression test for a failure
// the torture test found: with --two-phase, a target connection lost while
// the session start reads max_prepared_transactions (a network cut, the
// target crashing) stopped walapply for good ("twophase: reading
// max_prepared_transactions on the target: unexpected EOF", wrapped as a
// PermanentError). It must be retried like any lost connection; only a
// target with max_prepared_transactions = 0 is permanent.
func TestTortureLostTargetAtTwoPhaseCheck(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		pair := testenv.NewPair(t, testenv.PairOptions{Version: version})
		src, err := protocol.ConnectReplication(ctx, pair.Source.ConnString("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close(ctx)
		px, err := faultproxy.New(fmt.Sprintf("127.0.0.1:%d", pair.Target.Port()))
		if err != nil {
			t.Fatal(err)
		}
		defer px.Close()
		target := strings.Replace(pair.Target.ConnString("postgres"), fmt.Sprintf("127.0.0.1:%d", pair.Target.Port()), px.Addr(), 1)
		control, err := pgx.Connect(ctx, target)
		if err != nil {
			t.Fatal(err)
		}
		defer control.Close(ctx)
		s := &session{cfg: &Config{TwoPhase: true, Name: "regress", Logger: zerolog.Nop()}, source: src, control: control}

		px.DropAll() // the connection is lost just before the check
		_, err = checkTwoPhase(ctx, s, &preflightFacts{version: src.ServerVersion()})
		if err == nil {
			t.Fatal("the preflight's two-phase check succeeded on a lost target connection")
		}
		if !IsTransient(err) {
			t.Errorf("a lost target connection at the two-phase check is permanent: %v", err)
		}
		t.Logf("error, retried: %v", err)
	})
}
