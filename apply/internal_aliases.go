package apply

import (
	"context"
	"strings"

	"github.com/walapply/walapply/apply/internal/relmap"
	"github.com/walapply/walapply/apply/internal/sqlgen"
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
