package sqlgen

import "strings"

// Rel names a relation by its schema and name, unquoted, as the source
// publishes it. It is comparable, so it keys maps of tables.
type Rel struct{ Schema, Name string }

// String is the relation quoted for SQL and messages (QuoteQualified).
func (r Rel) String() string { return QuoteQualified(r.Schema, r.Name) }

// LogName is the relation as a log field names it (LogRelation).
func (r Rel) LogName() string { return LogRelation(r.Schema, r.Name) }

// LogRelations names relations in one log field ("relations"):
// LogRelation's form, comma-separated.
func LogRelations(rels []Rel) string {
	s := make([]string, len(rels))
	for i, r := range rels {
		s[i] = r.LogName()
	}
	return strings.Join(s, ", ")
}

// QuoteList quotes names for a column (or name) list: each with
// QuoteIdent, comma-separated.
func QuoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = QuoteIdent(n)
	}
	return strings.Join(q, ", ")
}

// QuoteLiteral quotes a string as an SQL string literal, doubling its
// single quotes. It is for walapply's own strings where a statement cannot
// take a parameter (SET TRANSACTION SNAPSHOT, a publication list in a
// query's text), never for a value from the stream, which is always a
// parameter. It assumes standard_conforming_strings on (PostgreSQL's
// default), under which a backslash is an ordinary character.
func QuoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
