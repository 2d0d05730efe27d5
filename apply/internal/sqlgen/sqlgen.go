// Package sqlgen builds the SQL text of the applier's statements: one
// INSERT, UPDATE, DELETE or TRUNCATE per change, with the WHERE clause that
// locates a row by its replica identity (REPLICA IDENTITY FULL: by every
// column, through the text form for types without an equality operator,
// changing exactly one row even when duplicates exist).
//
// SQL building is pure: it takes quoted names and returns statement text.
// Identifiers are always quoted with pgx.Identifier and values are always
// parameters (DESIGN.md invariant 7); nothing from the stream is ever
// spliced into SQL text except through QuoteIdent.
package sqlgen

import (
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// QuoteIdent quotes one identifier.
func QuoteIdent(name string) string { return pgx.Identifier{name}.Sanitize() }

// QuoteQualified quotes a schema-qualified name.
func QuoteQualified(schema, name string) string { return pgx.Identifier{schema, name}.Sanitize() }

// LogRelation names a relation in a log field ("relation"): schema.name
// unquoted, as PostgreSQL's own messages do, so that a JSON log holds no
// escaped quotes (QuoteQualified's form is for messages and SQL).
func LogRelation(schema, name string) string { return schema + "." + name }

// MatchColumn is a column of a WHERE clause that locates a row.
type MatchColumn struct {
	Name string // quoted
	// TextCompare compares through the text form, for types without an
	// equality operator (json, point, xml, ...): both sides are rendered by
	// the target's output function, so equal values compare equal.
	TextCompare bool
	// Nullable: the value may be NULL (REPLICA IDENTITY FULL), so use
	// IS NOT DISTINCT FROM rather than =.
	Nullable bool
	// OpSchema names the schema of the type's "=" when it is not in
	// pg_catalog (extension types such as citext and hstore): the apply
	// session's search_path holds only pg_catalog.
	OpSchema string
}

// Insert returns INSERT INTO table (c1, ...) OVERRIDING SYSTEM VALUE
// VALUES ($1, ...). The source's values go into identity columns too, also
// GENERATED ALWAYS ones, as PostgreSQL's subscriber and COPY write them
// (without the clause such a column refuses any value but DEFAULT).
func Insert(table string, cols []string) string {
	var b strings.Builder
	b.WriteString("INSERT INTO ")
	b.WriteString(table)
	if len(cols) == 0 {
		b.WriteString(" DEFAULT VALUES")
		return b.String()
	}
	b.WriteString(" (")
	for i, c := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(c)
	}
	b.WriteString(") " + OverridingSystemValue + "VALUES (")
	for i := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		WriteParam(&b, i+1)
	}
	b.WriteString(")")
	return b.String()
}

// OverridingSystemValue goes between an INSERT's column list and its rows
// (Insert).
const OverridingSystemValue = "OVERRIDING SYSTEM VALUE "

// Update returns an UPDATE that sets cols from $1.. and locates the row
// with match from the parameters that follow. With onlyOne the row is picked
// by its physical address so that exactly one row changes even when
// duplicates exist (REPLICA IDENTITY FULL); partitioned says the table is a
// partitioned table, whose ctid is not unique across partitions.
func Update(table string, cols []string, match []MatchColumn, onlyOne, partitioned bool) string {
	var b strings.Builder
	b.WriteString("UPDATE ")
	b.WriteString(table)
	b.WriteString(" SET ")
	if len(cols) == 0 {
		// Every published column was an unchanged TOAST value or is not
		// written on the target: the row still has to exist, so touch
		// nothing but make the statement count it.
		b.WriteString(match[0].Name)
		b.WriteString(" = ")
		b.WriteString(match[0].Name)
	}
	for i, c := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(c)
		b.WriteString(" = ")
		WriteParam(&b, i+1)
	}
	writeLocate(&b, table, match, len(cols)+1, onlyOne, partitioned)
	return b.String()
}

// Delete returns a DELETE locating the row from $1...
func Delete(table string, match []MatchColumn, onlyOne, partitioned bool) string {
	var b strings.Builder
	b.WriteString("DELETE FROM ")
	b.WriteString(table)
	writeLocate(&b, table, match, 1, onlyOne, partitioned)
	return b.String()
}

// Truncate returns TRUNCATE for the tables; only[i] adds ONLY (plain
// tables: the source lists every truncated relation itself, inheritance
// children included, while a partitioned table must be truncated whole).
func Truncate(tables []string, only []bool, cascade, restartIdentity bool) string {
	var b strings.Builder
	b.WriteString("TRUNCATE ")
	for i, t := range tables {
		if i > 0 {
			b.WriteString(", ")
		}
		if only[i] {
			b.WriteString("ONLY ")
		}
		b.WriteString(t)
	}
	if restartIdentity {
		b.WriteString(" RESTART IDENTITY")
	}
	if cascade {
		b.WriteString(" CASCADE")
	}
	return b.String()
}

func writeLocate(b *strings.Builder, table string, match []MatchColumn, firstParam int, onlyOne, partitioned bool) {
	b.WriteString(" WHERE ")
	if onlyOne {
		if partitioned {
			b.WriteString("(tableoid, ctid) = (SELECT tableoid, ctid FROM ")
		} else {
			b.WriteString("ctid = (SELECT ctid FROM ")
		}
		b.WriteString(table)
		b.WriteString(" WHERE ")
		writeMatch(b, match, firstParam)
		b.WriteString(" LIMIT 1)")
		return
	}
	writeMatch(b, match, firstParam)
}

func writeMatch(b *strings.Builder, match []MatchColumn, firstParam int) {
	for i, m := range match {
		if i > 0 {
			b.WriteString(" AND ")
		}
		if m.TextCompare {
			b.WriteString(m.Name)
			b.WriteString("::text IS NOT DISTINCT FROM ")
			WriteParam(b, firstParam+i)
			b.WriteString("::text")
			continue
		}
		if m.OpSchema != "" {
			// IS NOT DISTINCT FROM cannot name its operator.
			op := " OPERATOR(" + QuoteIdent(m.OpSchema) + ".=) "
			if m.Nullable {
				b.WriteString("(")
			}
			b.WriteString(m.Name)
			b.WriteString(op)
			WriteParam(b, firstParam+i)
			if m.Nullable {
				b.WriteString(" OR (")
				b.WriteString(m.Name)
				b.WriteString(" IS NULL AND ")
				WriteParam(b, firstParam+i)
				b.WriteString(" IS NULL))")
			}
			continue
		}
		b.WriteString(m.Name)
		if m.Nullable {
			b.WriteString(" IS NOT DISTINCT FROM ")
		} else {
			b.WriteString(" = ")
		}
		WriteParam(b, firstParam+i)
	}
}

// WriteParam writes the placeholder of parameter n ($n).
func WriteParam(b *strings.Builder, n int) {
	b.WriteByte('$')
	b.WriteString(strconv.Itoa(n))
}
