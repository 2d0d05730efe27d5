package protocol

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// EventKind says what a StreamEvent carries.
type EventKind uint8

const (
	// EventXLogData carries one pgoutput message in Data.
	EventXLogData EventKind = iota + 1
	// EventKeepalive is the server's primary keepalive.
	EventKeepalive
)

// StreamEvent is one CopyData message from the walsender.
type StreamEvent struct {
	Kind EventKind
	// WALStart is the WAL position of the message (XLogData only).
	WALStart LSN
	// ServerWALEnd is the end of WAL on the server when it sent this.
	ServerWALEnd LSN
	ServerTime   time.Time
	// ReplyRequested: the server wants a status update now or it will
	// eventually time the connection out (keepalive only).
	ReplyRequested bool
	// Data is the pgoutput message (XLogData only). It aliases the
	// connection's read buffer and is valid until the next Receive.
	Data []byte
}

// ErrReceiveTimeout is matched (errors.Is) by the error Receive returns when
// its context's deadline passes before a message arrives. The stream stays
// usable: the caller typically sends a status update and receives again.
var ErrReceiveTimeout = errors.New("protocol: no message from the source before the receive deadline")

// errReceiveTimeout also matches context.DeadlineExceeded. Prebuilt: a
// timeout is the common idle case and must not allocate.
var errReceiveTimeout = fmt.Errorf("%w: %w", ErrReceiveTimeout, context.DeadlineExceeded)

// IsTimeout reports whether err is a receive timeout.
func IsTimeout(err error) bool { return errors.Is(err, ErrReceiveTimeout) }

// ErrStreamEnded is returned by Receive once the server ended copy-both mode
// with CopyDone.
var ErrStreamEnded = errors.New("protocol: the source ended the replication stream")

// ReplStream is a running START_REPLICATION stream.
//
// Receive is meant for one goroutine. SendStatus may be called from another
// goroutine while a Receive is blocked.
//
// Receive does not allocate per message. pgconn's own per-call context
// handling would (it registers and unregisters a watcher on every call), so
// the stream manages its context itself: it registers one callback per
// distinct context (keyed by its Done channel) that interrupts a blocked
// read, and maps the context's deadline onto the socket's read deadline,
// changing the socket only when the deadline changes. pgconn treats a socket
// timeout as recoverable (its chunk reader keeps partial reads), which is
// what makes a timed-out Receive safe to retry.
type ReplStream struct {
	conn    *ReplConn
	netConn net.Conn
	opts    DecoderOptions
	pubs    []string // the publications asked for (replconn_notice.go)

	mu          sync.Mutex // guards the fields below; the cancel callback runs in its own goroutine
	watchedDone <-chan struct{}
	stopWatch   func() bool
	deadline    time.Time // the read deadline set on netConn
	poisoned    bool      // a cancel callback set a deadline in the past

	sendMu sync.Mutex
	status [39]byte // CopyData header (5) + standby status update (34)

	ended atomic.Pointer[error] // why the stream is over; nil while it runs
}

// StartReplication starts streaming slot from start (the server starts at
// the greater of start and the slot's confirmed_flush_lsn). The options are
// checked against the server version first: asking for something the server
// or the protocol version cannot do is an *UnsupportedError before anything
// is sent. Only options the server knows are sent. The slot is read first
// (see checkSlotForStart): a missing one is ErrSlotNotFound. A server error
// comes back as a wrapped *pgconn.PgError and leaves the connection usable.
func (c *ReplConn) StartReplication(ctx context.Context, slot string, start LSN, o StreamOptions) (*ReplStream, error) {
	if err := ValidateSlotName(slot); err != nil {
		return nil, err
	}
	if err := c.ready(); err != nil {
		return nil, err
	}
	plan, err := planStart(c.version, o)
	if err != nil {
		return nil, err
	}
	if err := c.checkSlotForStart(ctx, slot, o.TwoPhase); err != nil {
		return nil, err
	}
	err = pglogrepl.StartReplication(ctx, c.pg, slot, pglogrepl.LSN(start), pglogrepl.StartReplicationOptions{
		Mode:       pglogrepl.LogicalReplication,
		PluginArgs: plan.pluginArgs,
	})
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && !c.pg.IsClosed() {
			c.drainToReady(ctx)
		} else {
			c.spent = fmt.Errorf("protocol: the replication connection failed: %w", err)
		}
		return nil, fmt.Errorf("protocol: start replication from slot %q at %s: %w", slot, start, err)
	}
	s := &ReplStream{conn: c, netConn: c.pg.Conn(), opts: plan.decoder, pubs: o.Publications}
	c.stream = s
	if c.paced != nil {
		c.paced.startPacing() // coalesce.go; the connection takes no more commands
	}
	return s, nil
}

// ErrSlotNotFound is matched (errors.Is) when a slot does not exist.
var ErrSlotNotFound = errors.New("protocol: no such replication slot")

// checkSlotForStart reads the slot before START_REPLICATION, to turn what the
// server would report late or not at all into a clear error. A slot created
// with two-phase decoding sends Begin Prepare, Prepare, Commit Prepared and
// Rollback Prepared to every client, asked or not and whatever protocol
// version it asked for (checked on PostgreSQL 18 with proto_version 1), so a
// client that did not ask would fail mid-stream on a message it does not
// expect. The opposite, asking for two-phase on a slot without it, is how a
// subscriber turns it on: the server then enables it on the slot for good.
func (c *ReplConn) checkSlotForStart(ctx context.Context, slot string, twoPhase bool) error {
	st, found, err := c.Slot(ctx, slot)
	switch {
	case err != nil:
		return err
	case !found:
		return fmt.Errorf("%w: %q", ErrSlotNotFound, slot)
	case st.SlotType != "logical":
		return fmt.Errorf("protocol: replication slot %q is a %s slot; logical replication needs a logical pgoutput slot", slot, st.SlotType)
	case st.Plugin != "pgoutput":
		return fmt.Errorf("protocol: replication slot %q uses output plugin %q, not pgoutput", slot, st.Plugin)
	case st.TwoPhase && !twoPhase:
		return fmt.Errorf("protocol: replication slot %q was created with two-phase decoding and sends prepared transactions at PREPARE; ask for two-phase decoding (--two-phase) or use another slot", slot)
	}
	return nil
}

// DecoderOptions returns what the decoder of this stream must expect.
func (s *ReplStream) DecoderOptions() DecoderOptions { return s.opts }

// Receive waits for the next XLogData or keepalive and fills ev. Notices and
// parameter changes are skipped, except a warning that a publication was
// skipped, which ends the stream with a *PublicationSkippedError. A context deadline that passes returns an
// error matching ErrReceiveTimeout and leaves the stream usable; a canceled
// context returns an error matching context.Canceled, also leaving it
// usable. A server ErrorResponse ends the stream and comes back as a
// wrapped *pgconn.PgError.
func (s *ReplStream) Receive(ctx context.Context, ev *StreamEvent) error {
	return s.ReceiveBefore(ctx, time.Time{}, ev)
}

// ReceiveBefore is Receive with a deadline of its own besides ctx's (the
// earlier one counts; zero: none): once it passes, the error matches
// ErrReceiveTimeout, as for a context deadline. It is for a loop that wakes
// up at a different moment for nearly every message: deriving a context per
// call costs a timer, a callback goroutine and several allocations, more
// than receiving the message itself, while a long-lived ctx is armed once
// and the socket deadline is only touched when deadline changes.
func (s *ReplStream) ReceiveBefore(ctx context.Context, deadline time.Time, ev *StreamEvent) error {
	if p := s.ended.Load(); p != nil {
		return *p
	}
	if err := ctx.Err(); err != nil {
		return s.ctxError(err)
	}
	s.arm(ctx, deadline)
	for {
		// context.Background: pgconn then skips its per-call watcher.
		msg, err := s.conn.pg.ReceiveMessage(context.Background())
		if err != nil {
			if pgconn.Timeout(err) && !s.conn.pg.IsClosed() {
				if cerr := ctx.Err(); cerr != nil {
					return s.ctxError(cerr)
				}
				// The socket deadline is the context's deadline; the
				// context's own timer may fire a moment later.
				return errReceiveTimeout
			}
			return s.end(fmt.Errorf("protocol: receive from the replication stream: %w", err))
		}
		switch msg := msg.(type) {
		case *pgproto3.CopyData:
			if err := parseStreamEvent(msg.Data, ev); err != nil {
				return s.end(err)
			}
			return nil
		case *pgproto3.NoticeResponse:
			// Handled here rather than in pgconn's OnNotice callback (which
			// runs inside the same ReceiveMessage): returning from this
			// loop is what guarantees that nothing after the notice is
			// handed out, and so never confirmed.
			if err := skippedPublication(msg, s.pubs); err != nil {
				return s.end(err)
			}
			continue
		case *pgproto3.ParameterStatus:
			continue
		case *pgproto3.ErrorResponse:
			return s.end(fmt.Errorf("protocol: the source ended the replication stream with an error: %w", pgconn.ErrorResponseToPgError(msg)))
		case *pgproto3.CopyDone, *pgproto3.CommandComplete, *pgproto3.ReadyForQuery:
			// The server ends the stream when it shuts down (it sends
			// CopyDone, then completes the command).
			return s.end(ErrStreamEnded)
		default:
			return s.end(fmt.Errorf("protocol: unexpected %T on the replication stream", msg))
		}
	}
}

// parseStreamEvent decodes the CopyData payload of a replication stream:
// XLogData ('w': start, end, server clock, pgoutput message) or a primary
// keepalive ('k': end, server clock, reply requested). It overwrites every
// field of ev; Data aliases d.
func parseStreamEvent(d []byte, ev *StreamEvent) error {
	if len(d) == 0 {
		return errors.New("protocol: empty CopyData on the replication stream")
	}
	switch d[0] {
	case 'w':
		if len(d) < 25 {
			return fmt.Errorf("protocol: XLogData of %d bytes is shorter than its 25-byte header", len(d))
		}
		*ev = StreamEvent{
			Kind:         EventXLogData,
			WALStart:     LSN(binary.BigEndian.Uint64(d[1:])),
			ServerWALEnd: LSN(binary.BigEndian.Uint64(d[9:])),
			ServerTime:   Timestamp(binary.BigEndian.Uint64(d[17:])).Time(),
			Data:         d[25:],
		}
		return nil
	case 'k':
		if len(d) != 18 {
			return fmt.Errorf("protocol: primary keepalive of %d bytes, want 18", len(d))
		}
		*ev = StreamEvent{
			Kind:           EventKeepalive,
			ServerWALEnd:   LSN(binary.BigEndian.Uint64(d[1:])),
			ServerTime:     Timestamp(binary.BigEndian.Uint64(d[9:])).Time(),
			ReplyRequested: d[17] != 0,
		}
		return nil
	}
	// 's' (primary status) exists on newer servers but only as the answer to
	// a request this client never sends.
	return fmt.Errorf("protocol: unknown CopyData message %q on the replication stream", d[0])
}

// encodeStatus writes a standby status update, framed as CopyData, into b.
func encodeStatus(b *[39]byte, write, flush, apply LSN, now time.Time, replyRequested bool) {
	b[0] = 'd'
	binary.BigEndian.PutUint32(b[1:], uint32(len(b)-1))
	b[5] = 'r'
	binary.BigEndian.PutUint64(b[6:], uint64(write))
	binary.BigEndian.PutUint64(b[14:], uint64(flush))
	binary.BigEndian.PutUint64(b[22:], uint64(apply))
	binary.BigEndian.PutUint64(b[30:], uint64(TimestampFromTime(now)))
	b[38] = 0
	if replyRequested {
		b[38] = 1
	}
}

// SendStatus sends a standby status update. write, flush and apply are sent
// exactly as given: for a logical slot, flush is what the server records as
// confirmed_flush_lsn (an invalid 0 leaves the slot alone). pglogrepl's
// helper would replace a zero flush or apply with write, confirming what
// was never made durable (DESIGN.md invariant 2); this builds the message
// itself instead. replyRequested asks the server for an immediate keepalive.
func (s *ReplStream) SendStatus(ctx context.Context, write, flush, apply LSN, replyRequested bool) error {
	if p := s.ended.Load(); p != nil {
		return *p
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("protocol: send status update: %w", err)
	}
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	encodeStatus(&s.status, write, flush, apply, time.Now(), replyRequested)
	if d, ok := ctx.Deadline(); ok {
		s.netConn.SetWriteDeadline(d)
		defer s.netConn.SetWriteDeadline(time.Time{})
	}
	if err := s.conn.pg.Frontend().SendUnbufferedEncodedCopyData(s.status[:]); err != nil {
		// A partial write leaves the stream unframed: it is over.
		return s.end(fmt.Errorf("protocol: send status update: %w", err))
	}
	return nil
}

// arm points the cancel callback at ctx and the socket's read deadline at
// the earlier of ctx's deadline and deadline.
func (s *ReplStream) arm(ctx context.Context, deadline time.Time) {
	done := ctx.Done()
	d, _ := ctx.Deadline()
	if !deadline.IsZero() && (d.IsZero() || deadline.Before(d)) {
		d = deadline
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if done != s.watchedDone {
		if s.stopWatch != nil {
			s.stopWatch()
			s.stopWatch = nil
		}
		s.watchedDone = done
		if done != nil {
			s.stopWatch = context.AfterFunc(ctx, func() { s.interrupt(done) })
		}
	}
	if s.poisoned || !d.Equal(s.deadline) {
		s.netConn.SetReadDeadline(d)
		s.deadline = d
		s.poisoned = false
	}
}

// interrupt runs when a watched context is done: a read deadline in the past
// wakes a blocked read, which then reports the context's error.
func (s *ReplStream) interrupt(done <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watchedDone != done {
		return // Receive moved on to another context meanwhile
	}
	s.netConn.SetReadDeadline(time.Unix(1, 0))
	s.poisoned = true
}

// release stops watching and clears the socket deadline.
func (s *ReplStream) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopWatch != nil {
		s.stopWatch()
		s.stopWatch = nil
	}
	s.watchedDone = nil
	s.netConn.SetReadDeadline(time.Time{})
	s.deadline = time.Time{}
	s.poisoned = false
}

// ctxError reports a done context; the stream stays usable.
func (s *ReplStream) ctxError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return errReceiveTimeout
	}
	return fmt.Errorf("protocol: receive from the replication stream: %w", err)
}

// end records that the stream is over and spends the connection.
func (s *ReplStream) end(err error) error {
	s.ended.CompareAndSwap(nil, &err)
	s.release()
	return err
}
