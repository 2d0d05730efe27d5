package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/walapply/walapply/apply/internal/pipeline"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/protocol"
)

// TestOpNames: every operation has one spelling, SQL's, in capitals, in
// pipeline.Op's names, TxnError.Op and the messages that name an operation;
// never the protocol message's name ("Insert").
func TestOpNames(t *testing.T) {
	for _, c := range []struct {
		op   pipeline.Op
		want string
	}{
		{pipeline.OpBegin, OpBegin}, {pipeline.OpInsert, OpInsert}, {pipeline.OpUpdate, OpUpdate}, {pipeline.OpDelete, OpDelete},
		{pipeline.OpTruncate, OpTruncate}, {pipeline.OpOrigin, OpOriginProgress}, {pipeline.OpCommit, OpCommit}, {pipeline.OpCopy, OpCopy},
	} {
		if c.op.String() != c.want {
			t.Errorf("opKind %d is %q, want %q", c.op, c.op, c.want)
		}
	}
	for _, c := range []struct {
		msg  protocol.MessageType
		kind byte
		want string
	}{
		{protocol.MessageTypeInsert, 'I', "INSERT"},
		{protocol.MessageTypeUpdate, 'U', "UPDATE"},
		{protocol.MessageTypeUpdate, 'G', "UPDATE"},
		{protocol.MessageTypeDelete, 'D', "DELETE"},
		{protocol.MessageTypeTruncate, 0, "TRUNCATE"},
	} {
		if got := opOf(c.msg).String(); got != c.want {
			t.Errorf("the op of a %s message is %q, want %q", c.msg, got, c.want)
		}
		if c.kind != 0 {
			if got := opOfKind(c.kind).String(); got != c.want {
				t.Errorf("the op of statement kind %c is %q, want %q", c.kind, got, c.want)
			}
		}
		if strings.ToUpper(c.want) != c.want || c.msg.String() == c.want {
			t.Fatalf("the table is wrong for %s", c.want)
		}
	}
	e := &relmap.Entry{Rel: &protocol.Relation{Namespace: "public", Name: "t", Columns: []protocol.RelationColumn{{Name: "id"}, {Name: "v"}}}}
	short := &protocol.TupleData{Columns: make([]protocol.TupleColumn, 1)}
	for _, c := range []struct {
		op    pipeline.Op
		which string
		want  string
	}{
		{pipeline.OpInsert, "", `INSERT on "public"."t": its tuple has 1 columns`},
		{pipeline.OpUpdate, "new", `UPDATE on "public"."t": its new tuple has 1 columns`},
		{pipeline.OpDelete, "old", `DELETE on "public"."t": its old tuple has 1 columns`},
	} {
		err := checkWidth(e, short, c.op, c.which)
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrProtocolOrder) {
			t.Errorf("checkWidth(%s): %v; want %q", c.op, err, c.want)
		}
	}
}
