package compact

// slab hands out the Rows and the cells of their images and keys for one
// write-out, from chunks that the next write-out reuses (reset): a row
// the group has not seen cost three allocations (its Row, its image, its
// key's string), now one, the map key. Nothing handed out may be used
// after reset, as nothing of the arena may (Compactor.Reset). Chunks are
// never grown in place, so a *Row and a []Cell stay valid until then.
type slab struct {
	rows   [][]Row
	nrow   int // rows handed out
	cellsC [][]Cell
	chunk  int // the cell chunk being handed out from
	off    int // cells handed out of it
}

const (
	slabRows  = 512
	slabCells = 4096
)

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
	s.nrow, s.chunk, s.off = 0, 0, 0
}
