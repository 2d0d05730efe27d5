package protocol_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/protocol"
	"github.com/walapply/walapply/testenv"
)

// TestAllMessageTypes runs one workload on a real source that produces every
// pgoutput message type, decodes it live through one slot per protocol
// version the server has, and compares each transcript with the one
// expected for that version. All slots are created before the workload, so
// they decode the same WAL.
//
// Decoding runs while the workload does, because whether an aborted
// transaction is streamed at all depends on it: PostgreSQL 18 skips a
// transaction it already knows to be aborted when its memory limit is hit,
// so the workload waits for the stream block before it rolls back.
func TestAllMessageTypes(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		ctx := replTestCtx(t)
		src := startReplSource(t, version)
		s1, s2, so := sqlSession(t, ctx, src), sqlSession(t, ctx, src), sqlSession(t, ctx, src)
		testenv.MustExecConn(t, ctx, s1, allTypesSchema...)

		admin := replConnect(t, ctx, src)
		maxProto := 4
		if admin.ServerVersion() < 160000 {
			maxProto = 3
		}
		var decoders []*liveDecoder
		for p := 1; p <= maxProto; p++ {
			// Two-phase decoding is a property of the slot: a two-phase slot
			// sends prepared transactions at PREPARE to every client.
			slot := fmt.Sprintf("v%d", p)
			if _, err := admin.CreateSlot(ctx, slot, protocol.SlotOptions{TwoPhase: p >= 3, Snapshot: "nothing"}); err != nil {
				t.Fatal(err)
			}
			decoders = append(decoders, startLiveDecoder(t, ctx, src, slot, allTypesOptions(p)))
		}
		// waitStreamed waits until every streaming decoder has received n
		// Stream Stop messages.
		waitStreamed := func(n int) {
			testenv.MustExecConn(t, ctx, so, "INSERT INTO t_flush VALUES (1)")
			for _, d := range decoders[1:] {
				d.waitStops(t, ctx, n)
			}
		}
		runAllTypesWorkload(t, ctx, s1, s2, so, waitStreamed)

		commits := map[int][]protocol.LSN{}
		for i, d := range decoders {
			p := i + 1
			t.Run(fmt.Sprintf("proto%d", p), func(t *testing.T) {
				tr, err := d.wait(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range tr.errs {
					t.Error(e)
				}
				want := expectedAllTypes(p)
				if !slices.Equal(tr.lines, want) {
					t.Errorf("transcript differs:\n%s\nwhole transcript:\n%s", diffTranscripts(want, tr.lines), strings.Join(tr.lines, "\n"))
				}
				commits[p] = tr.commits
			})
		}
		// Every protocol version saw the same committed transactions at the
		// same commit LSNs (a prepared one at its COMMIT PREPARED).
		for p := 2; p <= maxProto; p++ {
			if !slices.Equal(commits[1], commits[p]) {
				t.Errorf("commit LSNs differ between protocol 1 and %d:\n%v\n%v", p, commits[1], commits[p])
			}
		}
	})
}

// liveDecoder decodes a slot in a goroutine up to the end marker's Commit.
type liveDecoder struct {
	mu    sync.Mutex
	tr    *transcript
	stops int
	err   error
	done  chan struct{}
}

func startLiveDecoder(t *testing.T, ctx context.Context, src *testenv.Cluster, slot string, o protocol.StreamOptions) *liveDecoder {
	t.Helper()
	rc := replConnect(t, ctx, src)
	s, err := rc.StartReplication(ctx, slot, 0, o)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := protocol.NewDecoder(s.DecoderOptions())
	if err != nil {
		t.Fatal(err)
	}
	d := &liveDecoder{tr: newTranscript(s.DecoderOptions()), done: make(chan struct{})}
	go func() {
		defer close(d.done)
		err := d.run(ctx, s, dec)
		d.mu.Lock()
		d.err = err
		d.mu.Unlock()
	}()
	return d
}

func (d *liveDecoder) run(ctx context.Context, s *protocol.ReplStream, dec *protocol.Decoder) error {
	var ev protocol.StreamEvent
	marker := false
	for {
		if err := s.Receive(ctx, &ev); err != nil {
			return err
		}
		if ev.Kind != protocol.EventXLogData {
			continue
		}
		m, err := dec.Decode(ev.Data)
		if err != nil {
			return err
		}
		d.mu.Lock()
		d.tr.add(m)
		if m.Type() == protocol.MessageTypeStreamStop {
			d.stops++
		}
		n := len(d.tr.lines)
		d.mu.Unlock()
		if ins, ok := m.(*protocol.Insert); ok && d.tr.rels[ins.RelationID].Name == "t_key" && string(ins.New.Columns[0].Data) == "999" {
			marker = true
		}
		if marker && m.Type() == protocol.MessageTypeCommit {
			return nil
		}
		if n > 1000 {
			return fmt.Errorf("no end marker after 1000 messages")
		}
	}
}

// waitStops waits until the decoder has seen n Stream Stop messages. The
// walsender sees an in-progress transaction's WAL once it is flushed, which
// the WAL writer does within wal_writer_delay.
func (d *liveDecoder) waitStops(t *testing.T, ctx context.Context, n int) {
	t.Helper()
	for {
		d.mu.Lock()
		stops, err := d.stops, d.err
		d.mu.Unlock()
		if stops >= n {
			return
		}
		select {
		case <-d.done:
			t.Fatalf("decoder stopped after %d of %d stream blocks: %v", stops, n, err)
		case <-ctx.Done():
			t.Fatalf("waiting for %d stream blocks (have %d): %v", n, stops, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// wait waits for the decoder to reach the end marker.
func (d *liveDecoder) wait(ctx context.Context) (*transcript, error) {
	select {
	case <-d.done:
	case <-ctx.Done():
		return nil, fmt.Errorf("decoder did not reach the end marker: %w", ctx.Err())
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return nil, fmt.Errorf("decoder: %w (transcript so far:\n%s)", d.err, strings.Join(d.tr.lines, "\n"))
	}
	return d.tr, nil
}

// allTypesOptions asks each protocol version for everything it can do.
func allTypesOptions(p int) protocol.StreamOptions {
	o := protocol.StreamOptions{ProtoVersion: p, Publications: []string{"pub"}, Messages: true}
	if p >= 2 {
		o.Streaming = "on"
	}
	if p >= 3 {
		o.TwoPhase = true
	}
	if p >= 4 {
		o.Streaming = "parallel"
	}
	return o
}

var allTypesSchema = []string{
	"CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')",
	"CREATE TABLE t_enum (id int PRIMARY KEY, m mood)",
	"CREATE TABLE t_key (id int PRIMARY KEY, v text)",
	"CREATE TABLE t_full (a int, b text)",
	"ALTER TABLE t_full REPLICA IDENTITY FULL",
	// EXTERNAL: stored out of line uncompressed, so 5000 bytes are TOASTed.
	"CREATE TABLE t_toast (id int PRIMARY KEY, big text, n int)",
	"ALTER TABLE t_toast ALTER COLUMN big SET STORAGE EXTERNAL",
	"CREATE TABLE t_tr1 (id serial PRIMARY KEY)",
	"CREATE TABLE t_tr2 (id serial PRIMARY KEY)",
	"CREATE TABLE t_s (id int PRIMARY KEY)",
	"CREATE PUBLICATION pub FOR TABLE t_enum, t_key, t_full, t_toast, t_tr1, t_tr2, t_s",
	// Not published: a commit here flushes the WAL of other sessions'
	// in-progress transactions, which the walsender reads only when flushed.
	"CREATE TABLE t_flush (n int)",
	"SELECT pg_replication_origin_create('upstream')",
}

// bigMessageSQL emits a transactional message larger than logical_decoding_work_mem
// (64kB): queuing it makes its transaction the largest, so the reorder
// buffer streams (or, without streaming, spills) exactly the changes queued
// so far. This places stream block boundaries deterministically, on every
// server version, without debug_logical_replication_streaming.
const bigMessageSQL = "SELECT pg_logical_emit_message(true, 'big', repeat('x', 70000))"

// runAllTypesWorkload runs the statements whose decoding expectedAllTypes
// describes: s1 does most, s2 is a second session for interleaving, so
// the session with a replication origin.
// Each step is synchronous, so the WAL order is the order written here.
func runAllTypesWorkload(t *testing.T, ctx context.Context, s1, s2, so *pgx.Conn, waitStreamed func(n int)) {
	testenv.MustExecConn(t, ctx, s1, "INSERT INTO t_enum VALUES (1, 'happy')")
	testenv.MustExecConn(t, ctx, so,
		"SELECT pg_replication_origin_session_setup('upstream')",
		"BEGIN",
		"SELECT pg_replication_origin_xact_setup('0/ABCDEF', '2024-01-02 03:04:05+00')",
		"INSERT INTO t_key VALUES (1, 'a'), (2, 'b')",
		"COMMIT",
		"SELECT pg_replication_origin_session_reset()")
	testenv.MustExecConn(t, ctx, s1,
		"SELECT pg_logical_emit_message(false, 'note', 'hello')",
		"BEGIN",
		"SELECT pg_logical_emit_message(true, 'tx', 'inside')",
		"INSERT INTO t_key VALUES (3, 'c')",
		"COMMIT",
		// Key change: old key 'K'; then no old tuple.
		"BEGIN",
		"UPDATE t_key SET id = 10 WHERE id = 1",
		"UPDATE t_key SET v = 'z' WHERE id = 2",
		"DELETE FROM t_key WHERE id = 3",
		"COMMIT",
		// REPLICA IDENTITY FULL: the whole old row 'O'.
		"BEGIN",
		"INSERT INTO t_full VALUES (1, 'x')",
		"UPDATE t_full SET b = 'y'",
		"DELETE FROM t_full",
		"COMMIT",
		// Unchanged TOAST column: 'u'.
		"INSERT INTO t_toast VALUES (1, repeat('x', 5000), 0)",
		"UPDATE t_toast SET n = 1",
		"TRUNCATE t_tr1, t_tr2 RESTART IDENTITY CASCADE",
		// Streamed, with a subtransaction rolled back after it streamed.
		"BEGIN",
		"INSERT INTO t_s VALUES (1)",
		"SAVEPOINT a",
		"INSERT INTO t_s VALUES (2)",
		bigMessageSQL)
	waitStreamed(1)
	testenv.MustExecConn(t, ctx, s1,
		"ROLLBACK TO SAVEPOINT a",
		"INSERT INTO t_s VALUES (3)",
		"COMMIT",
		// Streamed, then aborted.
		"BEGIN",
		"INSERT INTO t_s VALUES (4)",
		bigMessageSQL)
	waitStreamed(3)
	testenv.MustExecConn(t, ctx, s1, "ROLLBACK")
	// Two streamed transactions interleaved.
	testenv.MustExecConn(t, ctx, s1, "BEGIN", "INSERT INTO t_s VALUES (5)")
	testenv.MustExecConn(t, ctx, s2, "BEGIN", "INSERT INTO t_s VALUES (6)")
	testenv.MustExecConn(t, ctx, s1, bigMessageSQL)
	testenv.MustExecConn(t, ctx, s2, bigMessageSQL)
	testenv.MustExecConn(t, ctx, s1, "INSERT INTO t_s VALUES (7)")
	testenv.MustExecConn(t, ctx, s2, "INSERT INTO t_s VALUES (8)")
	testenv.MustExecConn(t, ctx, s1, "COMMIT")
	testenv.MustExecConn(t, ctx, s2, "COMMIT")
	testenv.MustExecConn(t, ctx, s1,
		// Two-phase: committed, rolled back, and streamed then committed.
		"BEGIN",
		"INSERT INTO t_key VALUES (20, 'p')",
		"PREPARE TRANSACTION 'gid_c'",
		"COMMIT PREPARED 'gid_c'",
		"BEGIN",
		"INSERT INTO t_key VALUES (21, 'q')",
		"PREPARE TRANSACTION 'gid_r'",
		"ROLLBACK PREPARED 'gid_r'",
		"BEGIN",
		"INSERT INTO t_s VALUES (9)",
		bigMessageSQL,
		"INSERT INTO t_s VALUES (10)",
		"PREPARE TRANSACTION 'gid_s'",
		"COMMIT PREPARED 'gid_s'",
		// The end marker.
		"INSERT INTO t_key VALUES (999, 'end')",
	)
}

// diffTranscripts shows two transcripts side by side from the first difference.
func diffTranscripts(want, got []string) string {
	var b strings.Builder
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	fmt.Fprintf(&b, "first difference at line %d\n", i+1)
	for j := max(0, i-3); j < max(len(want), len(got)) && j < i+15; j++ {
		w, g := "", ""
		if j < len(want) {
			w = want[j]
		}
		if j < len(got) {
			g = got[j]
		}
		mark := " "
		if w != g {
			mark = "!"
		}
		fmt.Fprintf(&b, "%s %3d  %-45s | %s\n", mark, j+1, w, g)
	}
	return b.String()
}

// expectedAllTypes is the transcript runAllTypesWorkload must produce with
// allTypesOptions(proto). Protocol 1 gets every transaction whole at its
// commit and no aborted one; 2 streams the big ones and sends prepared
// transactions as ordinary ones at COMMIT PREPARED; 3 adds two-phase
// messages; 4 (streaming parallel) looks the same on paper, its Stream Abort
// carries the abort LSN and time, which the transcript checks.
func expectedAllTypes(proto int) []string {
	var l []string
	add := func(lines ...string) { l = append(l, lines...) }
	n := 0
	xid := func() string { n++; return fmt.Sprintf("x%d", n) } // next xid seen
	const bigMsg = "M%s tx big <70000 bytes>"
	ts := "R%s t_s d [id:23:k]"

	add("B "+xid(), "Y mood", "R t_enum d [id:23:k m:mood]", "I t_enum [t:1 t:happy]", "C")
	add("B "+xid(), "O upstream 0/ABCDEF", "R t_key d [id:23:k v:25]", "I t_key [t:1 t:a]", "I t_key [t:2 t:b]", "C")
	add("M nontx note hello")
	add("B "+xid(), "M tx tx inside", "I t_key [t:3 t:c]", "C")
	add("B "+xid(), "U t_key K[t:1 n] N[t:10 t:a]", "U t_key N[t:2 t:z]", "D t_key K[t:3 n]", "C")
	add("B "+xid(), "R t_full f [a:23:k b:25:k]", "I t_full [t:1 t:x]", "U t_full O[t:1 t:x] N[t:1 t:y]", "D t_full O[t:1 t:y]", "C")
	add("B "+xid(), "R t_toast d [id:23:k big:25 n:23]", "I t_toast [t:1 t:<5000 bytes> t:0]", "C")
	add("B "+xid(), "U t_toast N[t:1 u t:1]", "C")
	add("B "+xid(), "R t_tr1 d [id:23:k]", "R t_tr2 d [id:23:k]", "T [t_tr1 t_tr2] cascade restart", "C")

	if proto == 1 {
		// Without streaming the rolled-back subtransaction, message
		// included, is simply absent, and so is the aborted transaction.
		add("B "+xid(), fmt.Sprintf(ts, ""), "I t_s [t:1]", "I t_s [t:3]", "C")
		add("B "+xid(), "I t_s [t:5]", fmt.Sprintf(bigMsg, ""), "I t_s [t:7]", "C")
		add("B "+xid(), "I t_s [t:6]", fmt.Sprintf(bigMsg, ""), "I t_s [t:8]", "C")
		add("B "+xid(), "I t_key [t:20 t:p]", "C") // at COMMIT PREPARED
		add("B "+xid(), "I t_s [t:9]", fmt.Sprintf(bigMsg, ""), "I t_s [t:10]", "C")
		add("B "+xid(), "I t_key [t:999 t:end]", "C")
		return l
	}

	// The subtransaction: a stream block up to the big message, then its
	// abort. Each change carries its own (sub)transaction's xid, but
	// pgoutput gives a Message the top-level xid even inside a
	// subtransaction. After a Stream Abort pgoutput forgets which schemas
	// it sent in the stream, so t_s's Relation comes again, carrying the
	// xid of the change that needed it: the subtransaction that ROLLBACK TO
	// SAVEPOINT started anew.
	top, sub := xid(), xid()
	add("S "+top+" first", fmt.Sprintf(ts, "@"+top), "I@"+top+" t_s [t:1]", "I@"+sub+" t_s [t:2]", fmt.Sprintf(bigMsg, "@"+top), "E")
	add("A " + top + " " + sub)
	sub2 := xid()
	add("S "+top, fmt.Sprintf(ts, "@"+sub2), "I@"+sub2+" t_s [t:3]", "E", "c "+top)

	// The aborted transaction; its Relation is sent again, once per
	// streamed transaction.
	ab := xid()
	add("S "+ab+" first", fmt.Sprintf(ts, "@"+ab), "I@"+ab+" t_s [t:4]", fmt.Sprintf(bigMsg, "@"+ab), "E", "A "+ab+" "+ab)

	// Interleaved: each streams at its big message, the rest at commit.
	p, q := xid(), xid()
	add("S "+p+" first", fmt.Sprintf(ts, "@"+p), "I@"+p+" t_s [t:5]", fmt.Sprintf(bigMsg, "@"+p), "E")
	add("S "+q+" first", fmt.Sprintf(ts, "@"+q), "I@"+q+" t_s [t:6]", fmt.Sprintf(bigMsg, "@"+q), "E")
	add("S "+p, "I@"+p+" t_s [t:7]", "E", "c "+p)
	add("S "+q, "I@"+q+" t_s [t:8]", "E", "c "+q)

	if proto == 2 {
		// Prepared transactions arrive at COMMIT PREPARED, like commits;
		// the rolled-back one never; the big one streams when it grows.
		add("B "+xid(), "I t_key [t:20 t:p]", "C")
		s := xid()
		add("S "+s+" first", fmt.Sprintf(ts, "@"+s), "I@"+s+" t_s [t:9]", fmt.Sprintf(bigMsg, "@"+s), "E")
		add("S "+s, "I@"+s+" t_s [t:10]", "E", "c "+s)
	} else {
		c := xid()
		add("b "+c+" gid_c", "I t_key [t:20 t:p]", "P "+c+" gid_c", "K "+c+" gid_c")
		r := xid()
		add("b "+r+" gid_r", "I t_key [t:21 t:q]", "P "+r+" gid_r", "r "+r+" gid_r")
		s := xid()
		add("S "+s+" first", fmt.Sprintf(ts, "@"+s), "I@"+s+" t_s [t:9]", fmt.Sprintf(bigMsg, "@"+s), "E")
		add("S "+s, "I@"+s+" t_s [t:10]", "E", "p "+s+" gid_s", "K "+s+" gid_s")
	}
	add("B "+xid(), "I t_key [t:999 t:end]", "C")
	return l
}
