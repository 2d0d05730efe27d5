package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/walapply/walapply/protocol"
)

func init() {
	register("decode", command{summary: "print the decoded replication stream as JSON lines", run: decodeCmd})
}

// decodeStatusInterval is how often decode reports its position to the
// source; the walsender's default wal_sender_timeout is 60 s.
const decodeStatusInterval = 10 * time.Second

// decodeFlags are the flags of 'walapply decode'.
type decodeFlags struct {
	source, slot, publications string
	createSlot, temporarySlot  bool
	protoVersion               int
	streaming                  string
	twoPhase, binary, messages bool
	confirm                    bool
	start                      string
}

func decodeCmd(ctx context.Context, args []string) error {
	return decodeMain(ctx, args, os.Stdout, os.Stderr)
}

// decodeMain is the decode command with its output streams: one JSON object
// per pgoutput message on stdout, notes on stderr. It runs until ctx is
// canceled (SIGINT/SIGTERM), which is a clean stop.
func decodeMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("decode")
	fs.SetOutput(stderr)
	var f decodeFlags
	fs.StringVar(&f.source, "source", "", "source connection string (URL or key=value); walapply adds replication=database")
	fs.StringVar(&f.slot, "slot", "", "the source's pgoutput replication slot")
	fs.StringVar(&f.publications, "publication", "", "publication(s) to decode, comma-separated")
	fs.BoolVar(&f.createSlot, "create-slot", false, "create the slot when it does not exist (with --two-phase: a two-phase slot)")
	fs.BoolVar(&f.temporarySlot, "temporary-slot", false, "create --slot as a temporary slot, dropped when decode ends (it must not exist); without it --create-slot leaves a permanent slot that holds WAL until dropped")
	fs.IntVar(&f.protoVersion, "protocol-version", 0, "pgoutput protocol version 1-4 (0: the highest the source supports)")
	fs.StringVar(&f.streaming, "streaming", "off", "streaming of large in-progress transactions: off, on or parallel")
	fs.BoolVar(&f.twoPhase, "two-phase", false, "decode prepared transactions at PREPARE time")
	fs.BoolVar(&f.binary, "binary", false, "binary column values where the source supports them (printed as hex)")
	fs.BoolVar(&f.messages, "messages", false, "include pg_logical_emit_message output")
	fs.BoolVar(&f.confirm, "confirm", false, "confirm printed transactions to the source, so the slot moves on (default: the slot is left where it is)")
	fs.StringVar(&f.start, "start", "", "start position X/Y (default: the slot's confirmed_flush_lsn)")
	if err := parseWithEnv(fs, args, "source", "slot", "publication"); err != nil {
		return err
	}
	var start protocol.LSN
	if f.start != "" {
		var err error
		if start, err = protocol.ParseLSN(f.start); err != nil {
			return fmt.Errorf("--start: %w", err)
		}
	}
	d, err := openDecode(ctx, f, start, stderr)
	if err != nil {
		return err
	}
	defer d.rc.Close(context.Background())
	return d.loop(ctx, bufio.NewWriterSize(stdout, 64<<10))
}

// decodeSession is a running decode.
type decodeSession struct {
	rc      *protocol.ReplConn
	stream  *protocol.ReplStream
	dec     *protocol.Decoder
	confirm bool
	// flush is what status updates report as flushed and applied: the
	// slot's confirmed_flush_lsn as read at start, or with --confirm the end
	// of the last printed transaction.
	//
	// Without --confirm decode only peeks. It still has to answer the
	// walsender's keepalives, and a status update always carries a flush
	// position. Reporting the one the slot already has is the truth
	// (nothing beyond it was made durable here) and leaves the slot where
	// it is: the walsender copies flush into confirmed_flush_lsn, so the same
	// value changes nothing. An earlier value would move it backwards on
	// PostgreSQL 15, which copies without comparing.
	flush    protocol.LSN
	received protocol.LSN // write position: the furthest WAL position seen
	rels     map[uint32]*protocol.Relation
	types    map[uint32]string
	jw       decodeJSON
}

// openDecode connects, checks or creates the slot and starts streaming.
func openDecode(ctx context.Context, f decodeFlags, start protocol.LSN, stderr io.Writer) (*decodeSession, error) {
	rc, err := protocol.ConnectReplication(ctx, f.source, protocol.ApplicationName("walapply decode"))
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			rc.Close(context.Background())
		}
	}()
	sys, err := rc.IdentifySystem(ctx)
	if err != nil {
		return nil, err
	}
	st, found, err := rc.Slot(ctx, f.slot)
	// A client that has just disconnected may still hold the slot for a
	// moment (its walsender is exiting): give it a few seconds.
	for wait := 0; err == nil && found && st.Active && wait < 50; wait++ {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		st, found, err = rc.Slot(ctx, f.slot)
	}
	if err != nil {
		return nil, err
	}
	if found && f.temporarySlot {
		return nil, fmt.Errorf("replication slot %q exists, and --temporary-slot creates a new one; name another with --slot, or leave out --temporary-slot to decode from this one", f.slot)
	}
	if !found {
		if !f.createSlot && !f.temporarySlot {
			return nil, fmt.Errorf("replication slot %q does not exist on the source; create it with --create-slot, or decode from a temporary one with --temporary-slot", f.slot)
		}
		info, err := rc.CreateSlot(ctx, f.slot, protocol.SlotOptions{TwoPhase: f.twoPhase, Snapshot: "nothing", Temporary: f.temporarySlot})
		if err != nil {
			return nil, err
		}
		fmt.Fprintln(stderr, createdSlotNote(f.slot, info.ConsistentPoint, f.temporarySlot))
		st = protocol.SlotStatus{Name: f.slot, Plugin: "pgoutput", SlotType: "logical", Database: sys.DBName, TwoPhase: f.twoPhase, ConfirmedFlush: info.ConsistentPoint}
	}
	switch {
	case st.SlotType != "logical":
		return nil, fmt.Errorf("replication slot %q is a %s slot; decode needs a logical pgoutput slot", f.slot, st.SlotType)
	case st.Plugin != "pgoutput":
		return nil, fmt.Errorf("replication slot %q uses output plugin %q; decode needs pgoutput (create another slot with --create-slot)", f.slot, st.Plugin)
	case st.Database != sys.DBName:
		return nil, fmt.Errorf("replication slot %q belongs to database %q, but --source connects to %q; connect to that database", f.slot, st.Database, sys.DBName)
	case st.Active:
		return nil, fmt.Errorf("replication slot %q is in use by process %d; stop that client first", f.slot, st.ActivePID)
	}
	twoPhase := f.twoPhase
	switch {
	case st.TwoPhase && !twoPhase:
		// A two-phase slot sends prepared transactions at PREPARE to every
		// client, asked or not; the decoder must expect those messages.
		if f.protoVersion != 0 && f.protoVersion < 3 {
			return nil, fmt.Errorf("replication slot %q decodes prepared transactions at PREPARE, which needs protocol version 3 or later; raise --protocol-version or use another slot", f.slot)
		}
		twoPhase = true
		fmt.Fprintf(stderr, "walapply decode: slot %q is a two-phase slot: prepared transactions are decoded at PREPARE\n", f.slot)
	case twoPhase && !st.TwoPhase:
		return nil, fmt.Errorf("replication slot %q was created without two-phase decoding, and --two-phase would turn it on for good (PostgreSQL changes the slot at START_REPLICATION); leave out --two-phase or use a new slot with --create-slot --two-phase", f.slot)
	}
	s, err := rc.StartReplication(ctx, f.slot, start, protocol.StreamOptions{
		ProtoVersion: f.protoVersion,
		Publications: splitPublications(f.publications),
		Binary:       f.binary,
		Messages:     f.messages,
		Streaming:    f.streaming,
		TwoPhase:     twoPhase,
	})
	if err != nil {
		return nil, err
	}
	dec, err := protocol.NewDecoder(s.DecoderOptions())
	if err != nil {
		return nil, err
	}
	ok = true
	return &decodeSession{
		rc: rc, stream: s, dec: dec, confirm: f.confirm, flush: st.ConfirmedFlush, received: st.ConfirmedFlush,
		rels: map[uint32]*protocol.Relation{}, types: map[uint32]string{},
	}, nil
}

// loop prints messages until ctx ends. Output is flushed before every status
// update, so nothing is confirmed before it was written.
func (d *decodeSession) loop(ctx context.Context, out *bufio.Writer) error {
	for {
		if done, err := d.interval(ctx, out); done || err != nil {
			return err
		}
	}
}

// interval receives and prints for one status interval, then reports the
// position. It returns done when ctx ended.
func (d *decodeSession) interval(ctx context.Context, out *bufio.Writer) (done bool, err error) {
	rctx, cancel := context.WithTimeout(ctx, decodeStatusInterval)
	defer cancel()
	var ev protocol.StreamEvent
	for {
		err := d.stream.Receive(rctx, &ev)
		switch {
		case ctx.Err() != nil:
			return true, d.stop(out)
		case protocol.IsTimeout(err):
			return false, d.sendStatus(context.WithoutCancel(ctx), out, false)
		case err != nil:
			return true, fmt.Errorf("receive from slot: %w", err)
		}
		if ev.Kind == protocol.EventKeepalive {
			d.received = max(d.received, ev.ServerWALEnd)
			if ev.ReplyRequested {
				if err := d.sendStatus(context.WithoutCancel(ctx), out, false); err != nil {
					return true, err
				}
			}
			continue
		}
		d.received = max(d.received, ev.WALStart)
		m, err := d.dec.Decode(ev.Data)
		if err != nil {
			return true, fmt.Errorf("decode the message at %s: %w", ev.WALStart, err)
		}
		end, err := d.print(out, m, ev.WALStart)
		if err != nil {
			return true, err
		}
		if end != 0 && d.confirm {
			d.flush = end
		}
		if end != 0 || endsOutput(m) {
			// Something complete: let a reader see it.
			if err := out.Flush(); err != nil {
				return true, fmt.Errorf("write output: %w", err)
			}
		}
	}
}

// endsOutput reports whether m completes a unit a reader waits for besides
// transactions: a stream block, a stream abort, a non-transactional message.
func endsOutput(m protocol.Message) bool {
	switch m := m.(type) {
	case *protocol.StreamStop, *protocol.StreamAbort:
		return true
	case *protocol.LogicalMessage:
		return !m.Transactional()
	}
	return false
}

// sendStatus flushes the output and reports the position to the source.
func (d *decodeSession) sendStatus(ctx context.Context, out *bufio.Writer, replyRequested bool) error {
	if err := out.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	write := max(d.received, d.flush)
	if err := d.stream.SendStatus(ctx, write, d.flush, d.flush, replyRequested); err != nil {
		return fmt.Errorf("send the status update to the source: %w", err)
	}
	return nil
}

// stop ends a run cleanly: the output is flushed, then a last status update
// is sent and acknowledged (the walsender answers a reply request after it
// processed the update) before the connection closes. Without --confirm it
// reports the slot's own position, so the slot provably stays where it was.
func (d *decodeSession) stop(out *bufio.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.sendStatus(ctx, out, true); err != nil {
		return err
	}
	var ev protocol.StreamEvent
	for {
		if err := d.stream.Receive(ctx, &ev); err != nil {
			return fmt.Errorf("waiting for the source to acknowledge the final status update (flush %s): %w", d.flush, err)
		}
		if ev.Kind == protocol.EventKeepalive {
			return nil
		}
	}
}

// splitPublications splits a comma-separated list, dropping blanks.
func splitPublications(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// createdSlotNote tells what decode created: a temporary slot goes with
// the session; a permanent one keeps the source's WAL from being removed
// until someone drops it, so the note gives the statement.
func createdSlotNote(slot string, at protocol.LSN, temporary bool) string {
	if temporary {
		return fmt.Sprintf("walapply decode: created temporary replication slot %q at %s; it is dropped when decode ends", slot, at)
	}
	return fmt.Sprintf("walapply decode: created replication slot %q at %s; it is permanent and holds WAL on the source until dropped: SELECT pg_drop_replication_slot('%s'); (--temporary-slot creates one that goes when decode ends)",
		slot, at, strings.ReplaceAll(slot, "'", "''"))
}
