package apply

import (
	"strings"

	"github.com/walapply/walapply/apply/internal/sqlgen"
)

// rowHashFrom is the first PostgreSQL version with hash_record_extended
// (a variable for the tests of the text form).
var rowHashFrom = 140000

// valueHashedTypes are the column types (format_type's names, without a
// typmod) whose values rowDigest hashes as they are, by the type's own
// extended hash function, rather than by their text form. Each has one in
// every PostgreSQL since 14, and it hashes equal values equally on every
// version, since hash partitioning relies on it surviving pg_upgrade. Not
// here: types without a hash function (json, xml, money, bit, the
// geometric types, tsvector), enums (their hash is of the label's OID,
// which differs between clusters), the reg* types (OIDs again), domains,
// composite and range types (their parts are not checked): those compare
// by their text form.
var valueHashedTypes = map[string]bool{
	"boolean": true, "smallint": true, "integer": true, "bigint": true, "oid": true,
	"real": true, "double precision": true, "numeric": true,
	"text": true, "character varying": true, "character": true, "name": true, `"char"`: true, "bytea": true,
	"date": true, "time without time zone": true, "time with time zone": true,
	"timestamp without time zone": true, "timestamp with time zone": true, "interval": true,
	"uuid": true, "jsonb": true, "inet": true, "cidr": true, "macaddr": true, "macaddr8": true, "pg_lsn": true,
}

// collatedTypes are the value-hashed types whose hash follows a collation:
// rowDigest hashes them in "C", so that a nondeterministic collation on
// either side (which hashes 'A' and 'a' alike) cannot hide a difference.
var collatedTypes = map[string]bool{"text": true, "character varying": true, "character": true}

// rowDigest is the SQL expression, the same on both sides, of a row's
// 64-bit hash for compare's checksum (the sum of them) and for --keys.
//
// Why two forms. The text form (ROW(c1, c2, ...)::text, md5 of it) works
// on every version and for every type, but is slow: on the benchmark's 1.6
// GB it cost 21 CPU-s per side, all of it inside the cut-over's write
// pause, most of it the record's output function and md5 (a 2,000,000-row
// table of five columns: 3.5 s; 200,000 rows of 1 kB: 2.1 s; PostgreSQL
// 18). hash_record_extended hashes each value by its type's hash function
// without making text (0.44 s and 0.21 s for the same tables). So where
// both sides are PostgreSQL 14 or later, the row is hashed as a record
// whose fields are the value of each column of a valueHashedTypes type
// that has the same type on both sides (sourceTypes and targetTypes, by
// column), text in "C" for collatedTypes, and the text form of any other
// column; else the text form of the whole row, as before.
//
// A value's hash follows its type's equality: numeric 1.0 and 1.00, and
// float -0 and 0, hash alike (they are equal), as their text forms do not.
func rowDigest(columns, sourceTypes []string, targetTypes map[string]string, hashed bool) string {
	if !hashed {
		return "('x' || substr(pg_catalog.md5(" + rowText(columns) + "), 1, 16))::bit(64)::bigint"
	}
	var b strings.Builder
	b.WriteString("pg_catalog.hash_record_extended(ROW(")
	for i, c := range columns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(columnForHash(sqlgen.QuoteIdent(c), sourceTypes[i], targetTypes[c]))
	}
	b.WriteString("), 0)")
	return b.String()
}

// columnForHash is a column's field in rowDigest's record: its value when
// its type is value-hashed and the same on both sides, else its text form;
// text-like values in "C".
func columnForHash(col, sourceType, targetType string) string {
	base, _ := strings.CutSuffix(sourceType, "[]") // an array hashes by its elements' type
	if sourceType != targetType || !valueHashedTypes[base] {
		return "(" + col + ")::text COLLATE \"C\""
	}
	if collatedTypes[base] {
		return col + " COLLATE \"C\""
	}
	return col
}
