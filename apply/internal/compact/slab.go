package compact

import "unsafe"

// slab hands out the Rows, the cells of their images and keys, and the
// strings that key them in Table.Rows, for one write-out, from chunks that
// the next write-out reuses (reset): a row the group has not seen cost
// three allocations (its Row, its image, its key's string), now none once
// warm. Nothing handed out may be used after reset, as nothing of the
// arena may (Compactor.Reset): a key string's bytes are overwritten by the
// next write-out's keys, so Reset clears every map and order that holds
// one first. Chunks are never grown in place, so a *Row, a []Cell and a
// key string stay valid until then.
type slab struct {
	keys   [][]byte // key bytes; a string handed out points into a chunk
	kchunk int      // the key chunk being handed out from
	rows   [][]Row
	nrow   int // rows handed out
	cellsC [][]Cell
	chunk  int // the cell chunk being handed out from
	off    int // cells handed out of it
}

const (
	slabRows     = 512
	slabCells    = 4096
	slabKeyBytes = 64 << 10
)

// key returns b as a string whose bytes are stored in the slab, not
// allocated: a map key that lives until reset. A key longer than a chunk
// is allocated.
func (s *slab) key(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > slabKeyBytes {
		return string(b)
	}
	for {
		if s.kchunk == len(s.keys) {
			s.keys = append(s.keys, make([]byte, 0, slabKeyBytes))
		}
		if c := s.keys[s.kchunk]; len(c)+len(b) <= cap(c) {
			break
		}
		s.kchunk++
	}
	c := s.keys[s.kchunk]
	off := len(c)
	c = append(c, b...)
	s.keys[s.kchunk] = c
	return unsafe.String(&c[off], len(b))
}

// row returns a pointer to a stored copy of r.
func (s *slab) row(r Row) *Row {
	c, i := s.nrow/slabRows, s.nrow%slabRows
	if c == len(s.rows) {
		s.rows = append(s.rows, make([]Row, slabRows))
	}
	s.nrow++
	p := &s.rows[c][i]
	*p = r
	return p
}

// cells returns n zeroed cells, with no room to append past them.
func (s *slab) cells(n int) []Cell {
	if n > slabCells {
		return make([]Cell, n)
	}
	for {
		if s.chunk == len(s.cellsC) {
			s.cellsC = append(s.cellsC, make([]Cell, slabCells))
		}
		if s.off+n <= slabCells {
			break
		}
		s.chunk, s.off = s.chunk+1, 0
	}
	x := s.cellsC[s.chunk][s.off : s.off+n : s.off+n]
	s.off += n
	clear(x)
	return x
}

// reset makes every chunk available again; the rows it held are cleared,
// so that they keep nothing of the write-out alive.
func (s *slab) reset() {
	for c := 0; c*slabRows < s.nrow; c++ {
		clear(s.rows[c][:min(slabRows, s.nrow-c*slabRows)])
	}
	for i := range s.keys[:min(s.kchunk+1, len(s.keys))] {
		s.keys[i] = s.keys[i][:0]
	}
	s.nrow, s.chunk, s.off, s.kchunk = 0, 0, 0, 0
}
