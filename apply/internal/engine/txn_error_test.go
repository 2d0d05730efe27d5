package engine

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/protocol"
)

// TestDuplicateKeyWaysOut: a duplicate key's hint gives the commit LSN to
// skip and the conflict kind of the operation, and leaves --on-conflict
// out for a unique index other than the replica identity key.
func TestDuplicateKeyWaysOut(t *testing.T) {
	rel := &relmap.Entry{Rel: &protocol.Relation{Namespace: "public", Name: "t", Columns: []protocol.RelationColumn{
		{Name: "id", Flags: protocol.ColumnFlagKey}, {Name: "Code"}}}}
	dup := func(detail string) error {
		return &pgconn.PgError{Severity: "ERROR", Code: "23505", Message: "duplicate key value violates unique constraint", Detail: detail}
	}
	lsn := protocol.LSN(0x6AAB558)
	for _, c := range []struct {
		name      string
		te        *TxnError
		want, not []string
	}{
		{"insert on the key", &TxnError{CommitLSN: lsn, Op: OpInsert, Err: dup("Key (id)=(1) already exists.")},
			[]string{": Key (id)=(1) already exists.", "--skip-lsn 0/6AAB558", "--on-conflict insert_exists=skip", "insert_exists=apply"}, nil},
		{"update on the key", &TxnError{CommitLSN: lsn, Op: OpUpdate, Err: dup("Key (id)=(1) already exists.")},
			[]string{"--skip-lsn 0/6AAB558", "--on-conflict update_exists=skip", "update_exists=apply"}, []string{"insert_exists"}},
		{"another unique index", &TxnError{CommitLSN: lsn, Op: OpInsert, Err: dup(`Key ("Code")=(x) already exists.`)},
			[]string{`Key ("Code")=(x)`, "--skip-lsn 0/6AAB558", "--on-conflict does not apply"}, []string{"insert_exists=skip"}},
		{"a --skip-lsn in effect", &TxnError{CommitLSN: lsn, Op: OpInsert, SkipLSN: 5, Err: dup("Key (id)=(1) already exists.")},
			[]string{"did not match this transaction: to skip this transaction, give --skip-lsn 0/6AAB558", "insert_exists=skip"}, []string{"restart with --skip-lsn"}},
	} {
		if c.name == "another unique index" {
			SetCause(c.te, false, isOtherUnique(rel, c.te.Err))
		}
		got := c.te.Error()
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q missing from %s", c.name, w, got)
			}
		}
		for _, w := range c.not {
			if strings.Contains(got, w) {
				t.Errorf("%s: %q in %s", c.name, w, got)
			}
		}
	}
	if isOtherUnique(rel, dup("Key (id)=(1) already exists.")) {
		t.Error("the replica identity key taken for another index")
	}
}
