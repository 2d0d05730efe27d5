package engine

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/protocol"
)

// TestDecideSkip: the start check of --skip-lsn against the origin's
// progress and the recorded uses, without a server.
func TestDecideSkip(t *testing.T) {
	at := time.Date(2026, 12, 1, 15, 4, 5, 0, time.UTC)
	used := &SkipUse{Xid: 777, CommitLSN: 0x5000, At: at}
	passed := &SkipUse{Passed: true, Xid: 778, CommitLSN: 0x6000, At: at}
	for _, c := range []struct {
		name         string
		flag, origin protocol.LSN
		used         *SkipUse
		arm          protocol.LSN
		warn, err    []string // fragments
	}{
		{name: "no flag", origin: 0x9000},
		{name: "no flag, a use recorded", origin: 0x9000, used: used},
		{name: "above the origin", flag: 0x5000, origin: 0x4000, arm: 0x5000},
		{name: "fresh applier", flag: 0x1, arm: 0x1},
		{name: "below the origin", flag: 0x1, origin: 0x16B3F08,
			err: []string{"--skip-lsn 0/1 ", "0/16B3F08", `"walapply_a"`, "remove the --skip-lsn flag", "WALAPPLY_SKIP_LSN"}},
		{name: "at the origin", flag: 0x4000, origin: 0x4000, err: []string{"--skip-lsn 0/4000 is at or below", "0/4000"}},
		// After the skip the LSN is below the origin too: used, not refused.
		{name: "used, now below the origin", flag: 0x5000, origin: 0x5100, used: used,
			warn: []string{"--skip-lsn 0/5000 was already used at 2026-12-01T15:04:05Z (transaction xid 777 skipped); ignoring it", "remove it from the flags/environment"}},
		{name: "used, above the origin", flag: 0x5000, origin: 0x10, used: used, warn: []string{"already used"}},
		{name: "passed", flag: 0x5800, origin: 0x6100, used: passed,
			warn: []string{"--skip-lsn 0/5800 was passed without a match", "xid 778", "0/6000", "ignoring it"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			arm, warn, err := decideSkip(c.flag, c.origin, "walapply_a", c.used)
			if arm != c.arm {
				t.Errorf("armed %s, want %s", arm, c.arm)
			}
			check := func(what, got string, frags []string) {
				if (got == "") != (len(frags) == 0) {
					t.Errorf("%s %q, want fragments %q", what, got, frags)
				}
				for _, f := range frags {
					if !strings.Contains(got, f) {
						t.Errorf("%s %q lacks %q", what, got, f)
					}
				}
			}
			check("warning", warn, c.warn)
			msg := ""
			if err != nil {
				msg = err.Error()
				var pe *PermanentError
				if !errors.As(err, &pe) || Transient(err) {
					t.Errorf("%v is not permanent", err)
				}
			}
			check("error", msg, c.err)
		})
	}
}

// TestTxnErrorSkipHint: an error met while --skip-lsn names another
// transaction says so, and which LSN to give.
func TestTxnErrorSkipHint(t *testing.T) {
	base := TxnError{Xid: 9, CommitLSN: 0x1234, Op: "INSERT", Err: errors.New("boom")}
	if got := base.Error(); strings.Contains(got, "skip-lsn") {
		t.Errorf("no --skip-lsn given, yet %q", got)
	}
	e := base
	e.SkipLSN = 0xDEADBEEF
	if got, want := e.Error(), "; --skip-lsn 0/DEADBEEF did not match this transaction: to skip this transaction, give --skip-lsn 0/1234"; !strings.HasSuffix(got, want) {
		t.Errorf("got %q, want it to end with %q", got, want)
	}
	e.SkipSpent = true
	if got := e.Error(); !strings.Contains(got, "--skip-lsn 0/DEADBEEF is spent") || !strings.Contains(got, "give --skip-lsn 0/1234") {
		t.Errorf("spent: got %q", got)
	}
}
