package apply

import (
	"github.com/walapply/walapply/apply/internal/compact"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/protocol"
)

// compactable reports whether a relation's changes may be compacted (see
// compactor).
func compactable(e *relmap.Entry, p ConflictPolicies) bool {
	if e.Compact == 0 {
		e.Compact = 2
		if isCompactable(e, p) {
			e.Compact = 1
		}
	}
	return e.Compact == 1
}

func isCompactable(e *relmap.Entry, p ConflictPolicies) bool {
	// Upserts and inserts of missing rows are done row by row.
	if p[ConflictInsertExists] != PolicyError || p[ConflictUpdateMissing] == PolicyApply {
		return false
	}
	if e.Rel.ReplicaIdentity == protocol.ReplicaIdentityFull || len(e.Key) == 0 || !e.Target.KeyOnlyUnique {
		return false
	}
	// The target's one unique index must be the identity's key.
	if len(e.Target.UniqueCols) != len(e.Key) {
		return false
	}
	for _, i := range e.Key {
		if !e.Target.UniqueCols[e.Rel.Columns[i].Name] {
			return false
		}
	}
	return true
}

// packArrays turns the parameters queued row by row (rows of width
// values, nil for NULL) into width array parameters, one per column, in
// the binary array format (array_recv): a header, then each element as its
// length and bytes. The target copies the bytes as they are, where the text
// form of an array would have to be scanned for quotes and escapes
// (array_in was a quarter of the target's time on a pgbench backlog), and
// nothing needs escaping here either. elems gives each column's element
// type when its values are binary (0 or missing: text).
func (a *applier) packArrays(width int, elems []uint32) {
	rows := len(a.params) / width
	buf := a.arrayBuf[:0]
	ends := a.arrayEnds[:0]
	for c := 0; c < width; c++ {
		nulls := uint32(0)
		for r := 0; r < rows; r++ {
			if a.params[r*width+c] == nil {
				nulls = 1
				break
			}
		}
		elem := uint32(compact.TextOID)
		if c < len(elems) && elems[c] != 0 {
			elem = elems[c]
		}
		buf = compact.AppendArrayHeader(buf, elem, rows, nulls)
		for r := 0; r < rows; r++ {
			buf = compact.AppendArrayElem(buf, a.params[r*width+c])
		}
		ends = append(ends, len(buf))
	}
	a.arrayBuf, a.arrayEnds = buf, ends
	a.params, a.formats = a.params[:0], a.formats[:0]
	start := 0
	for _, end := range ends {
		a.params = append(a.params, buf[start:end])
		a.formats = append(a.formats, 1)
		start = end
	}
}
