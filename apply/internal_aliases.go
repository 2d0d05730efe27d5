package apply

import (
	"context"
	"strings"

	"github.com/walapply/walapply/apply/internal/compact"
	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/protocol"
)

// The names below are transitional: they keep the files of apply that
// other branches are still changing compiling after parts of apply moved
// under apply/internal (issue 19). Each is the moved declaration under its
// old name; the lead removes them once all branches are in, calling the
// packages directly.
//
// SQL generation (apply/internal/sqlgen).
type matchColumn = sqlgen.MatchColumn

const overridingSystemValue = sqlgen.OverridingSystemValue

func quoteIdent(name string) string                  { return sqlgen.QuoteIdent(name) }
func quoteQualified(schema, name string) string      { return sqlgen.QuoteQualified(schema, name) }
func logRelation(schema, name string) string         { return sqlgen.LogRelation(schema, name) }
func writeParam(b *strings.Builder, n int)           { sqlgen.WriteParam(b, n) }
func buildInsert(table string, cols []string) string { return sqlgen.Insert(table, cols) }
func buildUpdate(table string, cols []string, match []matchColumn, onlyOne, partitioned bool) string {
	return sqlgen.Update(table, cols, match, onlyOne, partitioned)
}
func buildDelete(table string, match []matchColumn, onlyOne, partitioned bool) string {
	return sqlgen.Delete(table, match, onlyOne, partitioned)
}
func buildTruncate(tables []string, only []bool, cascade, restartIdentity bool) string {
	return sqlgen.Truncate(tables, only, cascade, restartIdentity)
}

// Relation mapping (apply/internal/relmap).
type (
	relEntry      = relmap.Entry
	relationCache = relmap.Cache
	targetTable   = relmap.Table
	targetColumn  = relmap.Column
	querier       = relmap.Querier
	// tableCatalog is where the applier finds the target table of a
	// source relation (relcache.go).
	tableCatalog = relmap.Catalog
)

func newRelationCache(binary bool) *relationCache { return relmap.NewCache(binary) }
func sourceSchema(ns string) string               { return relmap.SourceSchema(ns) }
func lookupTargetTable(ctx context.Context, q querier, schema, name string) (*targetTable, bool, error) {
	return relmap.LookupTable(ctx, q, schema, name)
}

// Compaction (apply/internal/compact).
type (
	cell       = compact.Cell
	netRow     = compact.Row
	netTable   = compact.Table
	compactor  = compact.Compactor
	netKind    = compact.Kind
	binaryCols = compact.BinaryCols
)

const (
	netInsert      = compact.NetInsert
	netUpdate      = compact.NetUpdate
	netDelete      = compact.NetDelete
	netReplace     = compact.NetReplace
	netNothing     = compact.NetNothing
	maxCompactRows = compact.MaxRows
	maxArrayValue  = compact.MaxArrayValue
	textArrayOID   = compact.TextArrayOID
	textOID        = compact.TextOID
)

func newCompactor() *compactor { return compact.New() }
func rowKey(dst []byte, e *relEntry, t *protocol.TupleData) []byte {
	return compact.RowKey(dst, e, t)
}
func arrayRows(e *relEntry, rows []*netRow) (bool, binaryCols) { return compact.ArrayRows(e, rows) }
func writeRowSource(b *strings.Builder, arrays bool, n int, types []string, arrs []uint32) {
	compact.WriteRowSource(b, arrays, n, types, arrs)
}
func rowParamOIDs(arrays bool, n int, oids, arrs []uint32) []uint32 {
	return compact.RowParamOIDs(arrays, n, oids, arrs)
}
func appendArrayHeader(dst []byte, elem uint32, n int, nulls uint32) []byte {
	return compact.AppendArrayHeader(dst, elem, n, nulls)
}
func appendArrayElem(dst, v []byte) []byte { return compact.AppendArrayElem(dst, v) }
func rowForm(e *relEntry, rows []*netRow) (arrays bool, bin binaryCols, each func([]*netRow, int, func([]*netRow) error) error) {
	return compact.RowForm(e, rows)
}
func shapeName(kind string, arrays bool, n int, arrs []uint32) string {
	return compact.ShapeName(kind, arrays, n, arrs)
}
func chunks(rows []*netRow, perRow int, fn func([]*netRow) error) error {
	return compact.Chunks(rows, perRow, fn)
}
func valuesList(b *strings.Builder, n, cols, first int) { compact.ValuesList(b, n, cols, first) }
