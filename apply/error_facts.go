package apply

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/walapply/walapply/protocol"
)

// ErrorFacts are what an operator acts on in an error that ended a
// session, each as a field of its own: walapply run's fatal log record
// and the walapply_last_error_info metric carry them.
type ErrorFacts struct {
	// Txn: the error is a source transaction's (TxnError); Xid and
	// CommitLSN (the value for --skip-lsn) are its.
	Txn       bool
	Xid       uint32
	CommitLSN protocol.LSN
	// Operation is spelled as SQL spells it (INSERT, UPDATE, ..., COMMIT);
	// empty when the error names none.
	Operation string
	// Relation is schema.name, unquoted; empty when the error names none.
	Relation string
	// SQLState is the code of the server's error in the chain, if any.
	SQLState string
}

// FactsOf finds the facts err says.
func FactsOf(err error) ErrorFacts {
	var f ErrorFacts
	relation := ""
	var te *TxnError
	if errors.As(err, &te) {
		f.Txn, f.Xid, f.CommitLSN = true, te.Xid, te.CommitLSN
		f.Operation = strings.ToUpper(te.Op) // one spelling: INSERT, not Insert
		relation = te.Relation
	}
	var se *SchemaError
	if relation == "" && errors.As(err, &se) {
		relation = se.Relation
	}
	f.Relation = plainRelation(relation)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		f.SQLState = pgErr.Code
	}
	return f
}

// plainRelation turns a quoted qualified name ("public"."My Table", as
// apply's errors write it) into the plain form log fields use (public.My
// Table). Anything else is returned as it is.
func plainRelation(q string) string {
	var parts []string
	rest := q
	for rest != "" {
		if rest[0] != '"' {
			return q
		}
		var b strings.Builder
		i := 1
		for ; i < len(rest); i++ {
			if rest[i] == '"' {
				if i+1 < len(rest) && rest[i+1] == '"' {
					b.WriteByte('"')
					i++
					continue
				}
				break
			}
			b.WriteByte(rest[i])
		}
		if i >= len(rest) {
			return q // unterminated
		}
		parts = append(parts, b.String())
		rest = rest[i+1:]
		if rest != "" {
			if rest[0] != '.' {
				return q
			}
			rest = rest[1:]
		}
	}
	return strings.Join(parts, ".")
}
