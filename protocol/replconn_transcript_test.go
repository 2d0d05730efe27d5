package protocol_test

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/walapply/walapply/protocol"
)

// transcript turns a decoded message stream into one compact line per
// message, for comparison with an expected transcript, and checks on the way
// what cannot be written down in advance: LSNs and xids, relationally.
//
// Line format (xids become x1, x2, ... in order of first appearance; a
// streamed change carries "@xN", the (sub)transaction that made it):
//
//	B x1                        Begin
//	C                           Commit
//	O upstream 0/ABCDEF         Origin
//	Y mood                      Type (namespace public)
//	R t_key d [id:23:k v:25]    Relation: identity, columns name:type:key
//	I t_key [t:1 t:a]           Insert; values t:text b:hex n u
//	U t_key K[t:1 n] N[t:10 t:a]
//	D t_full O[t:1 t:y]
//	T [t_tr1 t_tr2] cascade restart
//	M tx bigMessageSQL <70000 bytes>      Message (tx or nontx)
//	S x5 first / S x5           Stream Start
//	E                           Stream Stop
//	c x5                        Stream Commit
//	A x5 x6                     Stream Abort (xid, subxid)
//	b x7 gid_c / P x7 gid_c / K x7 gid_c / r x8 gid_r / p x9 gid_s
type transcript struct {
	lines []string
	errs  []string // relational checks that failed

	proto    int
	parallel bool

	xids  map[uint32]string
	rels  map[uint32]*protocol.Relation
	types map[uint32]string

	// Open transaction state for the relational checks.
	begin        *protocol.Begin
	beginPrepare *protocol.BeginPrepare
	streamXid    uint32
	streamed     map[uint32]bool // top-level xids seen in Stream Start, not yet finished
	seenSegment  map[uint32]bool
	prepared     map[string]preparedTx // by GID
	lastEnd      protocol.LSN          // end LSN of the last finished transaction

	// Commit LSNs of every committed transaction, in order, for the
	// comparison between protocol versions.
	commits []protocol.LSN
}

type preparedTx struct {
	xid        uint32
	prepareLSN protocol.LSN
	endLSN     protocol.LSN
}

func newTranscript(opts protocol.DecoderOptions) *transcript {
	return &transcript{
		proto: opts.ProtoVersion, parallel: opts.StreamingParallel,
		xids: map[uint32]string{}, rels: map[uint32]*protocol.Relation{}, types: map[uint32]string{},
		streamed: map[uint32]bool{}, seenSegment: map[uint32]bool{}, prepared: map[string]preparedTx{},
	}
}

func (tr *transcript) failf(format string, args ...any) {
	tr.errs = append(tr.errs, fmt.Sprintf("line %d: ", len(tr.lines))+fmt.Sprintf(format, args...))
}

// xid names an xid; 0 is a failure (every xid field is required).
func (tr *transcript) xid(x uint32) string {
	if x == 0 {
		tr.failf("xid 0")
		return "x?"
	}
	if n, ok := tr.xids[x]; ok {
		return n
	}
	n := "x" + strconv.Itoa(len(tr.xids)+1)
	tr.xids[x] = n
	return n
}

func (tr *transcript) relName(id uint32) string {
	r, ok := tr.rels[id]
	if !ok {
		tr.failf("DML on relation %d before its Relation message", id)
		return strconv.Itoa(int(id))
	}
	return r.Name
}

func tupleText(td protocol.TupleData) string {
	parts := make([]string, len(td.Columns))
	for i, c := range td.Columns {
		switch c.Kind {
		case protocol.ColumnText:
			parts[i] = "t:" + shortValue(c.Data)
		case protocol.ColumnBinary:
			parts[i] = fmt.Sprintf("b:%x", c.Data)
		default:
			parts[i] = string(c.Kind)
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// short shows a value, or its length when long.
func shortValue(b []byte) string {
	if len(b) > 24 {
		return fmt.Sprintf("<%d bytes>", len(b))
	}
	return string(b)
}

// changeXid checks the xid of a change: inside a block it must be set
// (the top-level or a subtransaction xid), outside it is absent.
func (tr *transcript) changeXid(streamed bool, xid uint32) string {
	inBlock := tr.streamXid != 0
	if streamed != inBlock {
		tr.failf("change streamed=%v inside block=%v", streamed, inBlock)
	}
	if !streamed {
		return ""
	}
	return "@" + tr.xid(xid)
}

// add appends the line for m and runs the relational checks.
func (tr *transcript) add(m protocol.Message) {
	var line string
	switch m := m.(type) {
	case *protocol.Begin:
		if tr.begin != nil || tr.beginPrepare != nil {
			tr.failf("Begin inside a transaction")
		}
		if m.FinalLSN < tr.lastEnd || m.CommitTime == 0 {
			tr.failf("Begin final LSN %s (last end %s), time %d", m.FinalLSN, tr.lastEnd, m.CommitTime)
		}
		b := *m
		tr.begin = &b
		line = "B " + tr.xid(m.Xid)
	case *protocol.Commit:
		if tr.begin == nil {
			tr.failf("Commit without Begin")
		} else if m.CommitLSN != tr.begin.FinalLSN || m.CommitTime != tr.begin.CommitTime || m.EndLSN <= m.CommitLSN || m.Flags != 0 {
			tr.failf("Commit %+v does not match Begin %+v", m, tr.begin)
		}
		tr.begin = nil
		tr.finish(m.CommitLSN, m.EndLSN)
		line = "C"
	case *protocol.Origin:
		line = "O " + m.Name + " " + m.CommitLSN.String()
	case *protocol.TypeMessage:
		tr.types[m.TypeOID] = m.Name
		line = "Y " + m.Name + tr.changeXid(m.Streamed, m.Xid)
		if m.Namespace != "public" {
			tr.failf("Type namespace %q", m.Namespace)
		}
	case *protocol.Relation:
		r := *m
		tr.rels[m.RelationID] = &r
		cols := make([]string, len(m.Columns))
		for i, c := range m.Columns {
			typ := strconv.Itoa(int(c.TypeOID))
			if n, ok := tr.types[c.TypeOID]; ok {
				typ = n
			}
			cols[i] = c.Name + ":" + typ
			if c.IsKey() {
				cols[i] += ":k"
			}
		}
		line = fmt.Sprintf("R%s %s %c [%s]", tr.changeXid(m.Streamed, m.Xid), m.Name, m.ReplicaIdentity, strings.Join(cols, " "))
		if m.Namespace != "public" {
			tr.failf("Relation namespace %q", m.Namespace)
		}
	case *protocol.Insert:
		line = fmt.Sprintf("I%s %s %s", tr.changeXid(m.Streamed, m.Xid), tr.relName(m.RelationID), tupleText(m.New))
	case *protocol.Update:
		line = fmt.Sprintf("U%s %s ", tr.changeXid(m.Streamed, m.Xid), tr.relName(m.RelationID))
		if m.OldKind != 0 {
			line += string(m.OldKind) + tupleText(m.Old) + " "
		}
		line += "N" + tupleText(m.New)
	case *protocol.Delete:
		line = fmt.Sprintf("D%s %s %c%s", tr.changeXid(m.Streamed, m.Xid), tr.relName(m.RelationID), m.OldKind, tupleText(m.Old))
	case *protocol.Truncate:
		names := make([]string, len(m.RelationIDs))
		for i, id := range m.RelationIDs {
			names[i] = tr.relName(id)
		}
		line = fmt.Sprintf("T%s [%s]", tr.changeXid(m.Streamed, m.Xid), strings.Join(names, " "))
		if m.Options&protocol.TruncateCascade != 0 {
			line += " cascade"
		}
		if m.Options&protocol.TruncateRestartIdentity != 0 {
			line += " restart"
		}
	case *protocol.LogicalMessage:
		kind := "nontx"
		if m.Transactional() {
			kind = "tx"
		} else if tr.begin != nil || tr.beginPrepare != nil {
			tr.failf("non-transactional message inside a transaction")
		}
		if m.LSN == 0 {
			tr.failf("Message without LSN")
		}
		line = fmt.Sprintf("M%s %s %s %s", tr.changeXid(m.Streamed, m.Xid), kind, m.Prefix, shortValue(m.Content))
	case *protocol.StreamStart:
		if m.FirstSegment == tr.seenSegment[m.Xid] {
			tr.failf("Stream Start first=%v, but segments seen before: %v", m.FirstSegment, tr.seenSegment[m.Xid])
		}
		tr.seenSegment[m.Xid] = true
		tr.streamed[m.Xid] = true
		tr.streamXid = m.Xid
		line = "S " + tr.xid(m.Xid)
		if m.FirstSegment {
			line += " first"
		}
	case *protocol.StreamStop:
		tr.streamXid = 0
		line = "E"
	case *protocol.StreamCommit:
		if !tr.streamed[m.Xid] || m.EndLSN <= m.CommitLSN || m.CommitLSN < tr.lastEnd || m.CommitTime == 0 || m.Flags != 0 {
			tr.failf("Stream Commit %+v (streamed %v, last end %s)", m, tr.streamed[m.Xid], tr.lastEnd)
		}
		tr.endStream(m.Xid)
		tr.finish(m.CommitLSN, m.EndLSN)
		line = "c " + tr.xid(m.Xid)
	case *protocol.StreamAbort:
		if !tr.streamed[m.Xid] {
			tr.failf("Stream Abort of %d, which never streamed", m.Xid)
		}
		if m.Toplevel() {
			tr.endStream(m.Xid)
		}
		if tr.parallel != (m.AbortLSN != 0) || tr.parallel != (m.AbortTime != 0) {
			tr.failf("Stream Abort abort LSN %s time %d with parallel=%v", m.AbortLSN, m.AbortTime, tr.parallel)
		}
		if tr.parallel && m.AbortLSN < tr.lastEnd {
			tr.failf("Stream Abort LSN %s before the last end %s", m.AbortLSN, tr.lastEnd)
		}
		line = "A " + tr.xid(m.Xid) + " " + tr.xid(m.SubXid)
	case *protocol.BeginPrepare:
		if tr.begin != nil || tr.beginPrepare != nil {
			tr.failf("Begin Prepare inside a transaction")
		}
		if m.PrepareLSN < tr.lastEnd || m.EndLSN <= m.PrepareLSN || m.PrepareTime == 0 {
			tr.failf("Begin Prepare %+v (last end %s)", m, tr.lastEnd)
		}
		b := *m
		tr.beginPrepare = &b
		line = "b " + tr.xid(m.Xid) + " " + m.GID
	case *protocol.Prepare:
		bp := tr.beginPrepare
		if bp == nil || m.PrepareLSN != bp.PrepareLSN || m.EndLSN != bp.EndLSN || m.Xid != bp.Xid || m.GID != bp.GID || m.PrepareTime != bp.PrepareTime {
			tr.failf("Prepare %+v does not match Begin Prepare %+v", m, bp)
		}
		tr.beginPrepare = nil
		tr.prepared[m.GID] = preparedTx{xid: m.Xid, prepareLSN: m.PrepareLSN, endLSN: m.EndLSN}
		tr.lastEnd = m.EndLSN
		line = "P " + tr.xid(m.Xid) + " " + m.GID
	case *protocol.StreamPrepare:
		if !tr.streamed[m.Xid] || m.EndLSN <= m.PrepareLSN || m.PrepareLSN < tr.lastEnd || m.PrepareTime == 0 {
			tr.failf("Stream Prepare %+v (last end %s)", m, tr.lastEnd)
		}
		tr.endStream(m.Xid)
		tr.prepared[m.GID] = preparedTx{xid: m.Xid, prepareLSN: m.PrepareLSN, endLSN: m.EndLSN}
		tr.lastEnd = m.EndLSN
		line = "p " + tr.xid(m.Xid) + " " + m.GID
	case *protocol.CommitPrepared:
		p, ok := tr.prepared[m.GID]
		if !ok || p.xid != m.Xid || m.CommitLSN < p.endLSN || m.EndLSN <= m.CommitLSN || m.CommitTime == 0 {
			tr.failf("Commit Prepared %+v for prepared %+v (known %v)", m, p, ok)
		}
		delete(tr.prepared, m.GID)
		tr.finish(m.CommitLSN, m.EndLSN)
		line = "K " + tr.xid(m.Xid) + " " + m.GID
	case *protocol.RollbackPrepared:
		p, ok := tr.prepared[m.GID]
		if !ok || p.xid != m.Xid || m.PrepareEndLSN != p.endLSN || m.RollbackEndLSN <= m.PrepareEndLSN || m.RollbackTime < m.PrepareTime {
			tr.failf("Rollback Prepared %+v for prepared %+v (known %v)", m, p, ok)
		}
		delete(tr.prepared, m.GID)
		tr.lastEnd = m.RollbackEndLSN
		line = "r " + tr.xid(m.Xid) + " " + m.GID
	default:
		tr.failf("unexpected message %T", m)
		line = "?"
	}
	tr.lines = append(tr.lines, line)
}

func (tr *transcript) finish(commitLSN, endLSN protocol.LSN) {
	tr.commits = append(tr.commits, commitLSN)
	tr.lastEnd = endLSN
}

func (tr *transcript) endStream(xid uint32) {
	delete(tr.streamed, xid)
	delete(tr.seenSegment, xid)
}
