package apply

import (
	"bytes"
	"slices"

	"github.com/walapply/walapply/protocol"
)

// Rows in key order. A multi-row UPDATE or DELETE finds each row through
// the key's index, one lookup per row in the order of its row source;
// when the rows come sorted by key, consecutive lookups land on the same or
// neighbouring index and heap pages, which the target then finds in the
// CPU's caches. Timed directly on PostgreSQL 18 (pgbench_accounts at scale
// 10, rounds of 10,000 rows, alternating), an UPDATE through unnest() took
// 11.8–17.5 µs per row with sorted keys against 15.4–21.1 µs unsorted. Any
// order is correct: within a write-out every row has its own key.
//
// The order is the one the index most likely has, without asking the
// target: integers written as text by their value, anything else by its
// bytes (a binary integer's big-endian bytes sort like the integer when it
// is not negative).

// sortByKey sorts rows by their keys (see above).
func (c *compactor) sortByKey(rows []*netRow) {
	if len(rows) < 2 {
		return
	}
	slices.SortFunc(rows, func(a, b *netRow) int {
		for i := range a.key {
			if d := c.compareCells(a.key[i], b.key[i]); d != 0 {
				return d
			}
		}
		return 0
	})
}

// compareCells orders two key values: NULLs first, integers in text form
// by value, the rest by bytes.
func (c *compactor) compareCells(x, y cell) int {
	xn, yn := x.kind != protocol.ColumnText && x.kind != protocol.ColumnBinary, y.kind != protocol.ColumnText && y.kind != protocol.ColumnBinary
	if xn || yn {
		return boolOrder(yn) - boolOrder(xn)
	}
	a, b := c.bytes(x), c.bytes(y)
	if x.kind == protocol.ColumnText && y.kind == protocol.ColumnText && isDecimal(a) && isDecimal(b) {
		return compareDecimal(a, b)
	}
	return bytes.Compare(a, b)
}

func boolOrder(b bool) int {
	if b {
		return 1
	}
	return 0
}

// isDecimal reports whether v is an integer in text form: an optional
// minus sign and one or more digits, without leading zeros.
func isDecimal(v []byte) bool {
	if len(v) > 0 && v[0] == '-' {
		v = v[1:]
	}
	if len(v) == 0 || (v[0] == '0' && len(v) > 1) {
		return false
	}
	for _, ch := range v {
		if ch < '0' || ch > '9' {
			return false
		}
	}
	return true
}

// compareDecimal compares two integers in text form (isDecimal).
func compareDecimal(a, b []byte) int {
	an, bn := len(a) > 0 && a[0] == '-', len(b) > 0 && b[0] == '-'
	if an != bn {
		if an {
			return -1
		}
		return 1
	}
	d := len(a) - len(b)
	if d == 0 {
		d = bytes.Compare(a, b)
	}
	if d > 0 {
		d = 1
	} else if d < 0 {
		d = -1
	}
	if an {
		return -d
	}
	return d
}
