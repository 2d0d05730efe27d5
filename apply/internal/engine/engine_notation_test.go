package engine

import (
	"encoding/hex"
	"strconv"
	"strings"
	"testing"

	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/protocol"
	pt "github.com/walapply/walapply/protocol/protocoltest"
)

// The notation of the engine's transcripts (TestTranscripts): one message
// a line, built with protocoltest.

// encode builds one message of the notation in TestTranscripts.
func (e *engineCase) encode(t *testing.T, line string) []byte {
	f := strings.Fields(line)
	op, sub, _ := strings.Cut(f[0], "@")
	var xid uint32
	if sub != "" {
		xid = uint32(transcriptInt(t, sub))
	}
	args := f[1:]
	need := func(n int) {
		if len(args) < n {
			t.Fatalf("%s: want %d arguments", line, n)
		}
	}
	const ts = protocol.Timestamp(0)
	switch op {
	case "R":
		need(4)
		id := uint32(transcriptInt(t, args[0]))
		var cols []protocol.RelationColumn
		for _, c := range args[4:] {
			p := strings.Split(c, ":")
			cols = append(cols, pt.Column(p[0], uint32(transcriptInt(t, p[1])), len(p) > 2 && p[2] == "k"))
		}
		ident := map[string]byte{"d": protocol.ReplicaIdentityDefault, "f": protocol.ReplicaIdentityFull, "n": protocol.ReplicaIdentityNothing, "i": protocol.ReplicaIdentityIndex}[args[3]]
		raw := pt.Relation(id, xid, args[1], args[2], ident, cols...)
		e.rels[args[2]] = id
		if _, ok := e.target.tables.tables[relmap.SourceSchema(args[1])+"."+args[2]]; !ok {
			e.target.tables.addRelation(&protocol.Relation{RelationID: id, Namespace: args[1], Name: args[2], ReplicaIdentity: ident, Columns: cols})
		}
		return raw
	case "B":
		need(2)
		return pt.Begin(transcriptLSN(t, args[1]), ts, uint32(transcriptInt(t, args[0])))
	case "C":
		need(2)
		return pt.Commit(transcriptLSN(t, args[0]), transcriptLSN(t, args[1]), ts)
	case "O":
		need(1)
		return pt.Origin(0, args[0])
	case "I":
		need(1)
		return pt.Insert(e.rel(t, args[0]), xid, transcriptValues(t, args[1:])...)
	case "U", "D":
		need(1)
		var oldKind byte
		var old, new []pt.Col
		cur := &new
		for i := 1; i < len(args); i++ {
			switch args[i] {
			case "K", "O":
				oldKind, cur = args[i][0], &old
			case "N":
				cur = &new
			default:
				*cur = append(*cur, transcriptValues(t, args[i:i+1])...)
			}
		}
		if op == "D" {
			return pt.Delete(e.rel(t, args[0]), xid, oldKind, old...)
		}
		if oldKind == 0 {
			return pt.Update(e.rel(t, args[0]), xid, new...)
		}
		return pt.UpdateOld(e.rel(t, args[0]), xid, oldKind, old, new)
	case "T":
		var opts uint8
		var ids []uint32
		for _, a := range args {
			switch a {
			case "cascade":
				opts |= protocol.TruncateCascade
			case "restart":
				opts |= protocol.TruncateRestartIdentity
			default:
				ids = append(ids, e.rel(t, a))
			}
		}
		return pt.Truncate(xid, opts, ids...)
	case "S":
		need(1)
		return pt.StreamStart(uint32(transcriptInt(t, args[0])), len(args) > 1 && args[1] == "first")
	case "E":
		return pt.StreamStop()
	case "c":
		need(3)
		return pt.StreamCommit(uint32(transcriptInt(t, args[0])), transcriptLSN(t, args[1]), transcriptLSN(t, args[2]), ts)
	case "A":
		need(2)
		return pt.StreamAbort(uint32(transcriptInt(t, args[0])), uint32(transcriptInt(t, args[1])))
	case "b", "P", "p", "K":
		need(4)
		x, gid, l1, l2 := uint32(transcriptInt(t, args[0])), args[1], transcriptLSN(t, args[2]), transcriptLSN(t, args[3])
		switch op {
		case "b":
			return pt.BeginPrepare(l1, l2, ts, x, gid)
		case "P":
			return pt.Prepare(l1, l2, ts, x, gid)
		case "p":
			return pt.StreamPrepare(l1, l2, ts, x, gid)
		}
		return pt.CommitPrepared(l1, l2, ts, x, gid)
	case "r":
		need(4)
		return pt.RollbackPrepared(transcriptLSN(t, args[2]), transcriptLSN(t, args[3]), ts, ts, uint32(transcriptInt(t, args[0])), args[1])
	}
	t.Fatalf("%s: unknown message %q", line, op)
	return nil
}

func (e *engineCase) rel(t *testing.T, name string) uint32 {
	if id, ok := e.rels[name]; ok {
		return id
	}
	return uint32(transcriptInt(t, name)) // a relation without its Relation message
}

// transcriptValues parses t:text, b:hex, n and u.
func transcriptValues(t *testing.T, vs []string) []pt.Col {
	var cols []pt.Col
	for _, v := range vs {
		switch {
		case v == "n":
			cols = append(cols, pt.Null())
		case v == "u":
			cols = append(cols, pt.Unchanged())
		case strings.HasPrefix(v, "t:"):
			cols = append(cols, pt.Text(v[2:]))
		case strings.HasPrefix(v, "b:"):
			b, err := hex.DecodeString(v[2:])
			if err != nil {
				t.Fatalf("value %q: %v", v, err)
			}
			cols = append(cols, pt.Binary(b))
		default:
			t.Fatalf("value %q: want t:text, b:hex, n or u", v)
		}
	}
	return cols
}

func transcriptLSN(t *testing.T, s string) protocol.LSN {
	l, err := protocol.ParseLSN(s)
	if err != nil {
		t.Fatalf("LSN %q: %v", s, err)
	}
	return l
}

func transcriptInt(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("number %q: %v", s, err)
	}
	return n
}
