//go:build linux

package apply_test

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/internal/faultproxy"
	"github.com/walapply/walapply/internal/testutil"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/state"
	"github.com/walapply/walapply/testenv"
)

// corruptCase damages one message of one source transaction.
type corruptCase struct {
	name string
	// prepare runs on the source before the corruption is armed and must
	// be applied first (a transaction whose outcome is then damaged).
	prepare []string
	// sql runs on one source session: the transaction whose message is
	// damaged.
	sql []string
	// msgType and marker pick the message: its pgoutput type and, if set,
	// bytes it contains.
	msgType byte
	marker  string
	action  faultproxy.Action
	offset  int
	mask    byte // for FlipByte; 0 means 0xff
	// want is what the run's error matches (errors.Is), or nil; text is a
	// fragment of its message.
	want error
	text string
	// transient: the applier must reconnect by itself, not stop.
	transient bool
	// gid stays prepared on the target while the damaged outcome is not
	// applied.
	gid string
}

func insertSQL(tag string, from, to int) string {
	return fmt.Sprintf(`INSERT INTO c SELECT g, '%s ' || g FROM generate_series(%d, %d) g`, tag, from, to)
}

// corruptCases: flips in the framing (message type, tuple marker, counts,
// lengths, flags, the XLogData kind), which a decoder can notice, in
// ordinary, streamed and two-phase transactions; truncated messages; and a
// message torn by a connection reset. A flip inside a column value would go
// unnoticed (see the faultproxy package doc: that is TLS's job).
var corruptCases = []corruptCase{
	{name: "insert type byte", sql: []string{insertSQL("k1", 1, 3)}, msgType: 'I', marker: "k1 2",
		action: faultproxy.FlipByte, offset: 0, want: protocol.ErrUnknownMessageType, text: "unknown message type"},
	{name: "insert tuple marker", sql: []string{insertSQL("k2", 11, 13)}, msgType: 'I', marker: "k2 12",
		action: faultproxy.FlipByte, offset: 5, want: protocol.ErrBadMarker, text: `field "new tuple marker"`},
	{name: "insert column count", sql: []string{insertSQL("k3", 21, 23)}, msgType: 'I', marker: "k3 21",
		action: faultproxy.FlipByte, offset: 6, want: protocol.ErrBadLength, text: `field "new tuple column count"`},
	// The first column is the id, two digits: its length is 00 00 00 02.
	{name: "insert value length negative", sql: []string{insertSQL("k4", 31, 33)}, msgType: 'I', marker: "k4 33",
		action: faultproxy.FlipByte, offset: 9, want: protocol.ErrBadLength, text: `field "new tuple column 0 length"`},
	{name: "insert value length longer", sql: []string{insertSQL("k4", 34, 36)}, msgType: 'I', marker: "k4 35",
		action: faultproxy.FlipByte, offset: 12, mask: 0x40, want: protocol.ErrShortMessage, text: `field "new tuple column 0 value"`},
	{name: "insert value length shorter", sql: []string{insertSQL("k4", 37, 39)}, msgType: 'I', marker: "k4 39",
		action: faultproxy.FlipByte, offset: 12, mask: 0x03, want: protocol.ErrUnknownTupleKind, text: `field "new tuple column 1 kind"`},
	{name: "commit flags", sql: []string{"BEGIN", insertSQL("k5", 41, 60), "UPDATE c SET v = 'k5 updated' WHERE id = 100000", "COMMIT"}, msgType: 'C',
		action: faultproxy.FlipByte, offset: 1, want: protocol.ErrNonzeroFlags, text: "decoding Commit"},
	{name: "xlogdata kind", sql: []string{insertSQL("k6", 61, 63)}, msgType: 'I', marker: "k6 62",
		action: faultproxy.FlipByte, offset: -25, text: "unknown CopyData message"},
	{name: "truncated insert", sql: []string{insertSQL("k7", 71, 73)}, msgType: 'I', marker: "k7 72",
		action: faultproxy.Truncate, offset: 12, want: protocol.ErrShortMessage, text: "decoding Insert"},
	{name: "truncated commit", sql: []string{insertSQL("k8", 81, 90)}, msgType: 'C',
		action: faultproxy.Truncate, offset: 10, want: protocol.ErrShortMessage, text: "decoding Commit"},
	{name: "streamed commit flags", sql: []string{insertSQL("k9", 1001, 4000)}, msgType: 'c',
		action: faultproxy.FlipByte, offset: 5, want: protocol.ErrNonzeroFlags, text: "decoding Stream Commit"},
	{name: "streamed insert type byte", sql: []string{insertSQL("k10", 5001, 8000)}, msgType: 'I', marker: "k10 6000",
		action: faultproxy.FlipByte, offset: 0, want: protocol.ErrUnknownMessageType, text: "unknown message type"},
	{name: "prepare flags", sql: []string{"BEGIN", insertSQL("k11", 9001, 9005), "PREPARE TRANSACTION 'k11'", "COMMIT PREPARED 'k11'"}, msgType: 'P',
		action: faultproxy.FlipByte, offset: 1, want: protocol.ErrNonzeroFlags, text: "decoding Prepare"},
	{name: "commit prepared flags", prepare: []string{"BEGIN", insertSQL("k12", 9101, 9105), "PREPARE TRANSACTION 'k12'"},
		sql: []string{"COMMIT PREPARED 'k12'"}, msgType: 'K', gid: "k12",
		action: faultproxy.FlipByte, offset: 1, want: protocol.ErrNonzeroFlags, text: "decoding Commit Prepared"},
	{name: "torn insert", sql: []string{insertSQL("k13", 9201, 9203)}, msgType: 'I', marker: "k13 9202",
		action: faultproxy.Tear, offset: 8, transient: true},
}

// TestCorruptedStream damages the replication stream on its way from the
// source, through faultproxy, one message at a time (corruptCases). Each
// damage is a clear, permanent protocol error: the applier stops, nothing
// of the damaged transaction is on the target, the origin has not moved and
// the slot has confirmed nothing past it, no spill file is left; a restart
// without the damage applies the transaction, once. A connection torn in
// the middle of a message is a transient error instead: the applier
// reconnects by itself.
func TestCorruptedStream(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		// Only logical_decoding_work_mem: the small transactions must not
		// stream (debug_logical_replication_streaming would stream all).
		h := newHarness(t, version, map[string]string{"logical_decoding_work_mem": "64kB"}, nil)
		h.both(`CREATE TABLE c (id int PRIMARY KEY, v text)`)
		h.source(`CREATE PUBLICATION c FOR TABLE c`)
		h.twoPhaseSlot("corrupt")
		h.source(`INSERT INTO c VALUES (100000, 'before')`)
		px := startProxy(t, h.pair.Source)
		cfg := h.config("corrupt", "c")
		cfg.Source = proxiedConnString(px)
		cfg.Streaming, cfg.TwoPhase = "on", true
		cfg.SpillDir = filepath.Join(t.TempDir(), "spill")
		logs := &testutil.LogBuffer{}
		cfg.Logger = zerolog.New(zerolog.MultiLevelWriter(zerolog.NewTestWriter(t), logs)).Level(zerolog.InfoLevel)
		origin, err := state.OriginName("corrupt")
		if err != nil {
			t.Fatal(err)
		}
		progress := func() string {
			return h.scalar(false, "SELECT pg_replication_origin_progress($1, true)::text", origin)
		}
		confirmed := func() string {
			return h.scalar(true, "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = 'corrupt'")
		}
		before := func(a, b string) bool {
			return h.scalar(true, "SELECT ($1::pg_lsn < $2::pg_lsn)::text", a, b) == "true"
		}

		stop := h.runApplier(cfg)
		h.waitCaughtUp("corrupt", time.Minute)
		for _, tc := range corruptCases {
			t.Logf("case %q", tc.name)
			if tc.prepare != nil {
				h.source(tc.prepare...)
				h.waitCaughtUp("corrupt", time.Minute)
				h.waitPrepared(time.Minute, gidOf(t, "corrupt", h.sourceXid(tc.gid)))
			}
			rowsBefore := h.rows(h.pair.Target, tableRows("c", ""))
			p0 := progress()
			match := func(m []byte) bool { return m[0] == tc.msgType && bytes.Contains(m, []byte(tc.marker)) }
			damage, err := px.Corrupt(faultproxy.Corruption{Match: match, Action: tc.action, Offset: tc.offset, Mask: tc.mask})
			if err != nil {
				t.Fatal(err)
			}
			var targetGID string
			if tc.gid != "" {
				targetGID = gidOf(t, "corrupt", h.sourceXid(tc.gid))
			}
			h.source(tc.sql...)
			var d faultproxy.Damage
			select {
			case d = <-damage:
			case <-time.After(time.Minute):
				t.Fatalf("%s: no message was damaged", tc.name)
			}
			if d.Original[0] != tc.msgType {
				t.Fatalf("%s: damaged a %q message", tc.name, d.Original[0])
			}

			if tc.transient {
				h.waitLog(logs, time.Minute, "transient error; reconnecting")
				h.waitCaughtUp("corrupt", time.Minute)
				h.compare(tableRows("c", ""))
				continue
			}
			var runErr error
			select {
			case runErr = <-h.applierDone:
			case <-time.After(time.Minute):
				t.Fatalf("%s: the applier did not stop at the damaged message", tc.name)
			}
			_ = stop()
			t.Logf("%s: run error, as expected: %v", tc.name, runErr)
			if runErr == nil || apply.IsTransient(runErr) || (tc.want != nil && !errors.Is(runErr, tc.want)) || !strings.Contains(runErr.Error(), tc.text) ||
				!strings.Contains(runErr.Error(), "source LSN") {
				t.Fatalf("%s: run error %v; want a permanent error matching %v, saying %q and naming the source LSN", tc.name, runErr, tc.want, tc.text)
			}
			if tc.want != nil && !strings.Contains(runErr.Error(), "nothing of the transaction was applied or confirmed") {
				t.Errorf("%s: the error does not say that nothing was applied", tc.name)
			}
			// Nothing of the damaged transaction is on the target, and
			// nothing moved past it.
			if got := h.rows(h.pair.Target, tableRows("c", "")); !slices.Equal(got, rowsBefore) {
				t.Errorf("%s: the target's rows changed:\n%s", tc.name, diffRows(rowsBefore, got))
			}
			if targetGID != "" {
				h.waitPrepared(time.Second, targetGID) // still prepared, not committed
			} else {
				h.expectNonePrepared()
			}
			p1, c1 := progress(), confirmed()
			if p1 != p0 {
				t.Errorf("%s: the origin moved from %s to %s", tc.name, p0, p1)
			}
			if files := spillFiles(t, cfg.SpillDir); len(files) != 0 {
				t.Errorf("%s: spill files left: %v", tc.name, files)
			}

			// Without the damage, the transaction is applied once.
			stop = h.runApplier(cfg)
			h.waitCaughtUp("corrupt", time.Minute)
			h.compare(tableRows("c", ""))
			h.expectNonePrepared()
			p2 := progress()
			if !before(p0, p2) || !before(c1, p2) {
				t.Errorf("%s: origin %s before, %s after the resume; confirmed %s while stopped: want both before the damaged transaction's end %s", tc.name, p0, p2, c1, p2)
			}
		}
		stop()
	})
}

// sourceXid is the xid of a transaction prepared on the source.
func (h *harness) sourceXid(gid string) uint32 {
	h.t.Helper()
	var xid uint32
	if _, err := fmt.Sscan(h.scalar(true, "SELECT transaction::text FROM pg_prepared_xacts WHERE gid = $1", gid), &xid); err != nil {
		h.t.Fatal(err)
	}
	return xid
}
