package protocol

// Column kinds in TupleData.
const (
	ColumnNull      byte = 'n'
	ColumnUnchanged byte = 'u' // unchanged TOASTed value: keep the current one
	ColumnText      byte = 't'
	ColumnBinary    byte = 'b'
)

// TupleColumn is one column of a TupleData. Data is nil for 'n' and 'u' and
// aliases the decoded message for 't' and 'b'.
type TupleColumn struct {
	Kind byte
	Data []byte
}

// TupleData is a row image: one TupleColumn per published column, in the
// order of the relation's Relation message. Decode reuses Columns' backing
// array, so a warm TupleData decodes without allocating.
type TupleData struct {
	Columns []TupleColumn
}
