package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/walapply/walapply/protocol"
)

// decodeJSON builds one JSON object at a time, keys in the order written.
//
// The output format of 'walapply decode': one JSON object per pgoutput
// message, keys in a fixed order, "type" and "wal_start" (the XLogData's WAL
// position) first, then the message's fields. LSNs are "X/Y" strings, times
// RFC 3339 in UTC, xids numbers. DML names its relation as namespace.name
// from the Relation cache and lists columns as {name, kind, value}: kind is
// text, binary (value_hex), null or unchanged_toast. A text value or message
// content that is not valid UTF-8 comes as hex under value_hex/content_hex.
type decodeJSON struct {
	b     []byte
	first bool
}

func (j *decodeJSON) open(typ string, walStart protocol.LSN) {
	j.b = append(j.b[:0], '{')
	j.first = true
	j.str("type", typ)
	j.lsn("wal_start", walStart)
}

func (j *decodeJSON) key(k string) {
	if !j.first {
		j.b = append(j.b, ',')
	}
	j.first = false
	j.b = appendDecodeString(j.b, k)
	j.b = append(j.b, ':')
}

func (j *decodeJSON) str(k, v string)              { j.key(k); j.b = appendDecodeString(j.b, v) }
func (j *decodeJSON) lsn(k string, v protocol.LSN) { j.str(k, v.String()) }
func (j *decodeJSON) uint(k string, v uint64)      { j.key(k); j.b = strconv.AppendUint(j.b, v, 10) }
func (j *decodeJSON) int(k string, v int64)        { j.key(k); j.b = strconv.AppendInt(j.b, v, 10) }
func (j *decodeJSON) bool(k string, v bool)        { j.key(k); j.b = strconv.AppendBool(j.b, v) }
func (j *decodeJSON) time(k string, v protocol.Timestamp) {
	j.str(k, v.Time().Format(time.RFC3339Nano))
}

// bytes writes a value as a string when it is valid UTF-8, else as hex under
// k+"_hex", so that nothing is lost.
func (j *decodeJSON) bytes(k string, v []byte) {
	if utf8.Valid(v) {
		j.key(k)
		j.b = appendDecodeString(j.b, string(v))
		return
	}
	j.hex(k+"_hex", v)
}

func (j *decodeJSON) hex(k string, v []byte) {
	j.key(k)
	j.b = append(j.b, '"')
	const digits = "0123456789abcdef"
	for _, c := range v {
		j.b = append(j.b, digits[c>>4], digits[c&15])
	}
	j.b = append(j.b, '"')
}

// raw opens an array or object value: the caller appends the rest.
func (j *decodeJSON) raw(k string, open byte) { j.key(k); j.b = append(j.b, open) }

func (j *decodeJSON) close(w io.Writer) error {
	j.b = append(j.b, '}', '\n')
	_, err := w.Write(j.b)
	return err
}

// appendDecodeString appends s as a JSON string; invalid UTF-8 becomes U+FFFD.
func appendDecodeString(b []byte, s string) []byte {
	const digits = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20 || c == 0x7f:
				b = append(b, '\\', 'u', '0', '0', digits[c>>4], digits[c&15])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029': // valid JSON, but not valid JavaScript
			b = append(b, `\u202`...)
			b = append(b, digits[r&15])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// errDecodeUnknownRelation marks DML for a relation never described.
var errDecodeUnknownRelation = errors.New("protocol violation: change before its Relation message")

// print writes m as one JSON line. It returns the end LSN of the
// transaction m finishes (0 if it finishes none): the position that may be
// confirmed once the line is out.
func (d *decodeSession) print(out io.Writer, m protocol.Message, walStart protocol.LSN) (end protocol.LSN, err error) {
	j := &d.jw
	switch m := m.(type) {
	case *protocol.Begin:
		j.open("begin", walStart)
		j.lsn("final_lsn", m.FinalLSN)
		j.time("commit_time", m.CommitTime)
		j.uint("xid", uint64(m.Xid))
	case *protocol.Commit:
		j.open("commit", walStart)
		j.lsn("commit_lsn", m.CommitLSN)
		j.lsn("end_lsn", m.EndLSN)
		j.time("commit_time", m.CommitTime)
		end = m.EndLSN
	case *protocol.Origin:
		j.open("origin", walStart)
		j.lsn("origin_lsn", m.CommitLSN)
		j.str("name", m.Name)
	case *protocol.Relation:
		r := *m
		d.rels[m.RelationID] = &r
		j.open("relation", walStart)
		d.streamXid(m.Streamed, m.Xid)
		j.uint("relation_id", uint64(m.RelationID))
		j.str("namespace", m.Namespace)
		j.str("name", m.Name)
		j.str("replica_identity", decodeIdentityName(m.ReplicaIdentity))
		j.raw("columns", '[')
		for i, c := range m.Columns {
			if i > 0 {
				j.b = append(j.b, ',')
			}
			j.b = append(j.b, '{')
			j.first = true
			j.str("name", c.Name)
			j.bool("key", c.IsKey())
			j.uint("type_oid", uint64(c.TypeOID))
			if n, ok := d.types[c.TypeOID]; ok {
				j.str("type", n)
			}
			j.int("type_mod", int64(c.TypeMod))
			j.b = append(j.b, '}')
		}
		j.b = append(j.b, ']')
	case *protocol.TypeMessage:
		d.types[m.TypeOID] = decodeQualified(m.Namespace, m.Name)
		j.open("type", walStart)
		d.streamXid(m.Streamed, m.Xid)
		j.uint("type_oid", uint64(m.TypeOID))
		j.str("namespace", m.Namespace)
		j.str("name", m.Name)
	case *protocol.Insert:
		j.open("insert", walStart)
		d.streamXid(m.Streamed, m.Xid)
		rel, err := d.relation(m.RelationID)
		if err != nil {
			return 0, err
		}
		if err := d.tuple("new", rel, m.New); err != nil {
			return 0, err
		}
	case *protocol.Update:
		j.open("update", walStart)
		d.streamXid(m.Streamed, m.Xid)
		rel, err := d.relation(m.RelationID)
		if err != nil {
			return 0, err
		}
		if m.OldKind != 0 {
			if err := d.tuple(decodeOldName(m.OldKind), rel, m.Old); err != nil {
				return 0, err
			}
		}
		if err := d.tuple("new", rel, m.New); err != nil {
			return 0, err
		}
	case *protocol.Delete:
		j.open("delete", walStart)
		d.streamXid(m.Streamed, m.Xid)
		rel, err := d.relation(m.RelationID)
		if err != nil {
			return 0, err
		}
		if err := d.tuple(decodeOldName(m.OldKind), rel, m.Old); err != nil {
			return 0, err
		}
	case *protocol.Truncate:
		j.open("truncate", walStart)
		d.streamXid(m.Streamed, m.Xid)
		j.raw("relations", '[')
		for i, id := range m.RelationIDs {
			rel, ok := d.rels[id]
			if !ok {
				return 0, fmt.Errorf("truncate of relation %d: %w", id, errDecodeUnknownRelation)
			}
			if i > 0 {
				j.b = append(j.b, ',')
			}
			j.b = appendDecodeString(j.b, decodeQualified(rel.Namespace, rel.Name))
		}
		j.b = append(j.b, ']')
		j.bool("cascade", m.Options&protocol.TruncateCascade != 0)
		j.bool("restart_identity", m.Options&protocol.TruncateRestartIdentity != 0)
	case *protocol.LogicalMessage:
		j.open("message", walStart)
		d.streamXid(m.Streamed, m.Xid)
		j.bool("transactional", m.Transactional())
		j.lsn("lsn", m.LSN)
		j.str("prefix", m.Prefix)
		j.bytes("content", m.Content)
	case *protocol.StreamStart:
		j.open("stream_start", walStart)
		j.uint("xid", uint64(m.Xid))
		j.bool("first_segment", m.FirstSegment)
	case *protocol.StreamStop:
		j.open("stream_stop", walStart)
	case *protocol.StreamCommit:
		j.open("stream_commit", walStart)
		j.uint("xid", uint64(m.Xid))
		j.lsn("commit_lsn", m.CommitLSN)
		j.lsn("end_lsn", m.EndLSN)
		j.time("commit_time", m.CommitTime)
		end = m.EndLSN
	case *protocol.StreamAbort:
		j.open("stream_abort", walStart)
		j.uint("xid", uint64(m.Xid))
		j.uint("subxid", uint64(m.SubXid))
		if m.WithAbortInfo {
			j.lsn("abort_lsn", m.AbortLSN)
			j.time("abort_time", m.AbortTime)
		}
	case *protocol.BeginPrepare:
		d.prepareLine("begin_prepare", walStart, m.PrepareLSN, m.EndLSN, m.PrepareTime, m.Xid, m.GID)
	case *protocol.Prepare:
		d.prepareLine("prepare", walStart, m.PrepareLSN, m.EndLSN, m.PrepareTime, m.Xid, m.GID)
		end = m.EndLSN
	case *protocol.StreamPrepare:
		d.prepareLine("stream_prepare", walStart, m.PrepareLSN, m.EndLSN, m.PrepareTime, m.Xid, m.GID)
		end = m.EndLSN
	case *protocol.CommitPrepared:
		j.open("commit_prepared", walStart)
		j.lsn("commit_lsn", m.CommitLSN)
		j.lsn("end_lsn", m.EndLSN)
		j.time("commit_time", m.CommitTime)
		j.uint("xid", uint64(m.Xid))
		j.str("gid", m.GID)
		end = m.EndLSN
	case *protocol.RollbackPrepared:
		j.open("rollback_prepared", walStart)
		j.lsn("prepare_end_lsn", m.PrepareEndLSN)
		j.lsn("rollback_end_lsn", m.RollbackEndLSN)
		j.time("prepare_time", m.PrepareTime)
		j.time("rollback_time", m.RollbackTime)
		j.uint("xid", uint64(m.Xid))
		j.str("gid", m.GID)
		end = m.RollbackEndLSN
	default:
		return 0, fmt.Errorf("no output format for %s messages", m.Type())
	}
	if err := j.close(out); err != nil {
		return 0, fmt.Errorf("write output: %w", err)
	}
	return end, nil
}

func (d *decodeSession) prepareLine(typ string, walStart, prepareLSN, endLSN protocol.LSN, t protocol.Timestamp, xid uint32, gid string) {
	j := &d.jw
	j.open(typ, walStart)
	j.lsn("prepare_lsn", prepareLSN)
	j.lsn("end_lsn", endLSN)
	j.time("prepare_time", t)
	j.uint("xid", uint64(xid))
	j.str("gid", gid)
}

// streamXid writes the xid a streamed change carries.
func (d *decodeSession) streamXid(streamed bool, xid uint32) {
	if streamed {
		d.jw.uint("xid", uint64(xid))
	}
}

// relation writes the relation fields of a DML line.
func (d *decodeSession) relation(id uint32) (*protocol.Relation, error) {
	rel, ok := d.rels[id]
	if !ok {
		return nil, fmt.Errorf("change to relation %d: %w", id, errDecodeUnknownRelation)
	}
	d.jw.uint("relation_id", uint64(id))
	d.jw.str("relation", decodeQualified(rel.Namespace, rel.Name))
	return rel, nil
}

// tuple writes a row image as an array of {name, kind, value}.
func (d *decodeSession) tuple(k string, rel *protocol.Relation, td protocol.TupleData) error {
	if len(td.Columns) != len(rel.Columns) {
		return fmt.Errorf("row of %s has %d columns, its Relation message %d: protocol violation", decodeQualified(rel.Namespace, rel.Name), len(td.Columns), len(rel.Columns))
	}
	j := &d.jw
	j.raw(k, '[')
	for i, c := range td.Columns {
		if i > 0 {
			j.b = append(j.b, ',')
		}
		j.b = append(j.b, '{')
		j.first = true
		j.str("name", rel.Columns[i].Name)
		switch c.Kind {
		case protocol.ColumnText:
			j.str("kind", "text")
			j.bytes("value", c.Data)
		case protocol.ColumnBinary:
			j.str("kind", "binary")
			j.hex("value_hex", c.Data)
		case protocol.ColumnNull:
			j.str("kind", "null")
		case protocol.ColumnUnchanged:
			j.str("kind", "unchanged_toast")
		}
		j.b = append(j.b, '}')
	}
	j.b = append(j.b, ']')
	return nil
}

func decodeOldName(kind byte) string {
	if kind == protocol.TupleOldKey {
		return "old_key"
	}
	return "old"
}

func decodeIdentityName(b byte) string {
	switch b {
	case protocol.ReplicaIdentityDefault:
		return "default"
	case protocol.ReplicaIdentityNothing:
		return "nothing"
	case protocol.ReplicaIdentityFull:
		return "full"
	case protocol.ReplicaIdentityIndex:
		return "index"
	}
	return string(rune(b))
}

// decodeQualified is namespace.name; an empty namespace means pg_catalog.
func decodeQualified(ns, name string) string {
	if ns == "" {
		ns = "pg_catalog"
	}
	return ns + "." + name
}
