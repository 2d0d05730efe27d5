package apply

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/apply/internal/sqlgen"
	"github.com/walapply/walapply/internal/secret"
)

// CompareConfig says what to compare.
type CompareConfig struct {
	Source, Target string
	// Publications whose tables are compared; none: every publication on
	// the source.
	Publications []string
	// Jobs is the number of connections per side (default 4).
	Jobs int
	// Keys lists up to this many differing primary keys per table that
	// differs (0: none).
	Keys int
}

// CompareReport is the result: Equal when every table is.
type CompareReport struct {
	Equal  bool              `json:"equal"`
	Tables []TableComparison `json:"tables"`
}

// TableComparison is one published table on both sides.
type TableComparison struct {
	Schema string `json:"schema"`
	Name   string `json:"name"`
	Equal  bool   `json:"equal"`
	// Reason says why a table differs beyond its numbers (missing on the
	// target, a column missing, keys not listed), empty otherwise.
	Reason string      `json:"reason,omitempty"`
	Source TableDigest `json:"source"`
	Target TableDigest `json:"target"`
	// Keys are differing primary keys (CompareConfig.Keys), in key order.
	Keys []KeyDifference `json:"keys,omitempty"`
}

// String is the table's qualified, quoted name.
func (t TableComparison) String() string { return sqlgen.QuoteQualified(t.Schema, t.Name) }

// TableDigest is one side's count and checksum of a table.
type TableDigest struct {
	Rows     int64  `json:"rows"`
	Checksum string `json:"checksum"`
}

// KeyDifference is one primary key whose row differs: "missing" on the
// target, "extra" on the target, or "changed".
type KeyDifference struct {
	Key  string `json:"key"`
	Kind string `json:"difference"`
}

// compareSettings are the session settings of both sides: the row text
// forms compared must not depend on a server's or role's defaults.
var compareSettings = map[string]string{
	"TimeZone":           "UTC",
	"DateStyle":          "ISO, YMD",
	"IntervalStyle":      "postgres",
	"extra_float_digits": "3",
	"bytea_output":       "hex",
	"lc_monetary":        "C",
	"search_path":        "pg_catalog",
	"statement_timeout":  "0",
	"jit":                "off",
}

// comparedTable is what the source publishes of a table.
type comparedTable struct {
	schema, name string
	partitioned  bool     // on the source: read with its partitions
	columns      []string // published, in the source's order
	types        []string // format_type of each of columns on the source
	filter       string   // the source's row filter, "" for none
	key          []string // primary key (or replica identity index) columns
}

// Compare compares the published tables of the source with the target's.
//
// Compare: are the target's tables what the source publishes? For the
// cut-over (writes on the source stopped, the applier caught up, e.g.
// stopped with --until now) and for spot checks; on a source still being
// written to, a table the applier has not caught up with shows as
// different.
//
// Each side is read inside one snapshot: a REPEATABLE READ READ ONLY
// transaction exports it (pg_export_snapshot) and Jobs-1 more connections
// import it (SET TRANSACTION SNAPSHOT), so the tables compared in parallel
// are all seen at one moment of each side. Per table each side computes,
// on the server, the row count and an order-independent checksum: the sum,
// as numeric (no overflow), of a 64-bit hash of each row (rowDigest: the
// row hashed as a record of its values where both sides are PostgreSQL 14
// or later, else the first 64 bits of the md5 of its text form). Only
// those two numbers cross the network.
//
// The row is the record of the source's published columns, by name, in
// the source's column order, so columns in another order or extra columns
// on the target do not count; a published column missing on the target
// makes the table different. The source's row filters apply on the source
// side. Text forms depend on session settings, so both sides run with the
// same ones (compareSettings).
// With Keys, a table that differs is read once more on both sides, as
// (primary key, the row's hash) ordered by the key's text form in the "C"
// collation, and the two streams are merged to list the differing keys
// (compare_keys.go): memory stays bounded whatever the table's size, but
// each side sorts the table.
func Compare(ctx context.Context, c CompareConfig) (CompareReport, error) {
	if c.Source == "" || c.Target == "" {
		return CompareReport{}, fmt.Errorf("%w: compare needs a source and a target connection string", ErrConfig)
	}
	jobs := c.Jobs
	if jobs <= 0 {
		jobs = 4
	}
	src, err := openCompareSide(ctx, c.Source, "source", jobs)
	if err != nil {
		return CompareReport{}, err
	}
	defer src.close()
	tables, err := publishedTables(ctx, src.conns[0], c.Publications)
	if err != nil {
		return CompareReport{}, err
	}
	jobs = max(1, min(jobs, len(tables)))
	dst, err := openCompareSide(ctx, c.Target, "target", jobs)
	if err != nil {
		return CompareReport{}, err
	}
	defer dst.close()

	rep := CompareReport{Equal: true, Tables: make([]TableComparison, len(tables))}
	for i, t := range tables {
		rep.Tables[i] = TableComparison{Schema: t.schema, Name: t.name}
	}
	// The target's tables first: both sides must hash a row alike, so the
	// row's digest is chosen from both sides' columns (rowDigest).
	targets := make([]targetTable, len(tables))
	err = forEachTable(ctx, dst.conns, len(tables), func(conn *pgx.Conn, i int) error {
		var err error
		targets[i], err = lookupTargetTable(ctx, conn, tables[i])
		rep.Tables[i].Reason = targets[i].reason
		return err
	})
	if err != nil {
		return CompareReport{}, err
	}
	hashed := src.version >= rowHashFrom && dst.version >= rowHashFrom
	digests := make([]string, len(tables))
	for i, t := range tables {
		digests[i] = rowDigest(t.columns, t.types, targets[i].types, hashed)
	}
	var wg sync.WaitGroup
	var srcErr, dstErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		srcErr = forEachTable(ctx, src.conns[:jobs], len(tables), func(conn *pgx.Conn, i int) error {
			d, err := tableDigest(ctx, conn, tables[i], digests[i], tables[i].partitioned, tables[i].filter)
			rep.Tables[i].Source = d
			return err
		})
	}()
	go func() {
		defer wg.Done()
		dstErr = forEachTable(ctx, dst.conns, len(tables), func(conn *pgx.Conn, i int) error {
			if targets[i].reason != "" {
				return nil
			}
			d, err := tableDigest(ctx, conn, tables[i], digests[i], targets[i].partitioned, "")
			rep.Tables[i].Target = d
			return err
		})
	}()
	wg.Wait()
	if err := errors.Join(srcErr, dstErr); err != nil {
		return CompareReport{}, err
	}
	var differ []int
	for i := range rep.Tables {
		t := &rep.Tables[i]
		t.Equal = t.Reason == "" && t.Source == t.Target
		if !t.Equal {
			rep.Equal = false
			if t.Reason == "" {
				differ = append(differ, i)
			}
		}
	}
	if c.Keys > 0 && len(differ) > 0 {
		err := forEachTable(ctx, src.conns[:jobs], len(differ), func(conn *pgx.Conn, n int) error {
			i := differ[n]
			// Each source connection has the target connection of the
			// same index as its partner (forEachTable's worker index).
			return listDifferingKeys(ctx, conn, dst.partner(src, conn), tables[i], targets[i].partitioned, digests[i], c.Keys, &rep.Tables[i])
		})
		if err != nil {
			return CompareReport{}, err
		}
	}
	return rep, nil
}

// compareSide is one side's connections, all in one snapshot.
type compareSide struct {
	role    string
	conns   []*pgx.Conn
	version int // server_version_num
}

// openCompareSide connects jobs times to one side, the first connection
// exporting the snapshot the others import.
func openCompareSide(ctx context.Context, connString, role string, jobs int) (*compareSide, error) {
	pc, err := pgx.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("%w: %s connection string: %v", ErrConfig, role, secret.Error(err, connString))
	}
	delete(pc.RuntimeParams, "replication")
	pc.RuntimeParams["application_name"] = "walapply compare"
	for k, v := range compareSettings {
		pc.RuntimeParams[k] = v
	}
	s := &compareSide{role: role}
	var snapshot string
	for i := 0; i < jobs; i++ {
		conn, err := pgx.ConnectConfig(ctx, pc)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("connecting to the %s: %w", role, secret.Error(err, connString))
		}
		s.conns = append(s.conns, conn)
		if _, err := conn.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); err != nil {
			s.close()
			return nil, fmt.Errorf("starting the %s's snapshot transaction: %w", role, err)
		}
		if i == 0 {
			err = conn.QueryRow(ctx, "SELECT pg_catalog.pg_export_snapshot(), pg_catalog.current_setting('server_version_num')::int").Scan(&snapshot, &s.version)
		} else {
			_, err = conn.Exec(ctx, "SET TRANSACTION SNAPSHOT "+sqlgen.QuoteLiteral(snapshot))
		}
		if err != nil {
			s.close()
			return nil, fmt.Errorf("sharing one snapshot of the %s between %d connections (--jobs): %w", role, jobs, err)
		}
	}
	return s, nil
}

// partner is the connection of this side with the index conn has on the
// other side.
func (s *compareSide) partner(other *compareSide, conn *pgx.Conn) *pgx.Conn {
	for i, c := range other.conns {
		if c == conn {
			return s.conns[i]
		}
	}
	panic("compare: connection of neither side")
}

func (s *compareSide) close() {
	ctx := context.Background()
	for _, c := range s.conns {
		_ = c.Close(ctx) // the read-only transaction ends with the session
	}
}

// forEachTable runs fn for table indexes 0..n-1, each connection working
// through them one at a time; the first error stops the rest.
func forEachTable(ctx context.Context, conns []*pgx.Conn, n int, fn func(conn *pgx.Conn, i int) error) error {
	next := make(chan int)
	errs := make([]error, len(conns))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for w, conn := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if errs[w] = fn(conn, i); errs[w] != nil {
					cancel()
					return
				}
			}
		}()
	}
	func() {
		defer close(next)
		for i := 0; i < n; i++ {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return context.Cause(ctx)
}

// rowText is the text form of a table's row: the record of the columns.
func rowText(columns []string) string {
	return "ROW(" + sqlgen.QuoteList(columns) + ")::text"
}

// fromClause reads a table with its partitions when it is partitioned on
// that side, else without inheritance children (published apart), and the
// source's row filter.
func fromClause(t comparedTable, partitioned bool, filter string) string {
	from := " FROM ONLY " + sqlgen.QuoteQualified(t.schema, t.name)
	if partitioned {
		from = " FROM " + sqlgen.QuoteQualified(t.schema, t.name)
	}
	if filter != "" {
		from += " WHERE " + filter
	}
	return from
}

// tableDigest counts and checksums a table on one side: digest is the
// row's hash (rowDigest), partitioned is that side's fact, filter the
// source's row filter on the source ("" on the target, where rows outside
// it would be extra). The sum of 64-bit values is numeric: it cannot
// overflow.
func tableDigest(ctx context.Context, conn *pgx.Conn, t comparedTable, digest string, partitioned bool, filter string) (TableDigest, error) {
	q := "SELECT count(*), coalesce(sum(" + digest + "), 0)::text" + fromClause(t, partitioned, filter)
	var d TableDigest
	if err := conn.QueryRow(ctx, q).Scan(&d.Rows, &d.Checksum); err != nil {
		return d, fmt.Errorf("checksumming table %s: %w", sqlgen.QuoteQualified(t.schema, t.name), err)
	}
	return d, nil
}
