package schema

import (
	"context"
	"strings"
	"sync"

	"github.com/rs/zerolog"
)

// Table is the table an index build is of, read from pg_dump's statement:
// `CREATE [UNIQUE] INDEX name ON table USING ...` or `ALTER TABLE ONLY
// table ADD CONSTRAINT ...`. It reports false for any other entry, and for
// an index ON ONLY a partitioned table (its partitions' indexes are
// attached to it later in the section).
func (e Entry) Table() (Object, bool) {
	if !e.IsBuild() {
		return Object{}, false
	}
	sql := stripComments(e.SQL)
	var rest string
	switch {
	case strings.HasPrefix(sql, "ALTER TABLE ONLY "):
		rest = sql[len("ALTER TABLE ONLY "):]
	case strings.HasPrefix(sql, "CREATE INDEX "), strings.HasPrefix(sql, "CREATE UNIQUE INDEX "):
		// The index's name is unqualified and may be quoted: skip it.
		_, after, ok := cutIdent(sql[strings.Index(sql, "INDEX ")+len("INDEX "):])
		if !ok || !strings.HasPrefix(after, " ON ") || strings.HasPrefix(after, " ON ONLY ") {
			return Object{}, false
		}
		rest = after[len(" ON "):]
	default:
		return Object{}, false
	}
	sch, after, ok := cutIdent(rest)
	if !ok || !strings.HasPrefix(after, ".") {
		return Object{}, false
	}
	name, after, ok := cutIdent(after[1:])
	if !ok || after == "" || !strings.ContainsAny(after[:1], " \n\t") {
		return Object{}, false
	}
	return Object{Schema: sch, Name: name}, true
}

// stripComments drops the blank and comment lines before an entry's
// statement (Parse keeps pg_dump's "--" lines around it).
func stripComments(sql string) string {
	for {
		sql = strings.TrimLeft(sql, " \t\n")
		if !strings.HasPrefix(sql, "--") {
			return sql
		}
		_, rest, ok := strings.Cut(sql, "\n")
		if !ok {
			return ""
		}
		sql = rest
	}
}

// cutIdent reads one identifier as pg_dump writes it (bare, or in double
// quotes with "" for a quote) from the start of s, and returns it unquoted
// with what follows it.
func cutIdent(s string) (ident, rest string, ok bool) {
	if strings.HasPrefix(s, `"`) {
		var b strings.Builder
		for i := 1; i < len(s); i++ {
			if s[i] != '"' {
				b.WriteByte(s[i])
				continue
			}
			if i+1 < len(s) && s[i+1] == '"' {
				b.WriteByte('"')
				i++
				continue
			}
			return b.String(), s[i+1:], b.Len() > 0
		}
		return "", s, false
	}
	i := strings.IndexAny(s, ". \n\t(;")
	if i <= 0 {
		return "", s, false
	}
	return s[:i], s[i:], true
}

// EarlyBuilds runs the index builds of a post-data section (Entry.Table)
// table by table, as soon as each table is copied (Copied), while the
// copy of the others goes on.
//
// Why: the post-data section used to wait for the last table's copy, and
// a migration is usually one or two big tables and some smaller ones.
// With a copy worker busy on the biggest table to the end, the other
// tables' index builds (a primary key on millions of rows takes seconds)
// sat in a queue behind it while a core stood idle; now they take that
// core. A build needs nothing but its own table, whose copy has committed,
// and no stream is applied before the whole section is built. What is not
// a build of one table copied here (foreign keys, triggers, the attaching
// of partitions' indexes, a table an earlier attempt copied, a build that
// did not get to run) is left for BuildPostData: Finish returns it.
//
// At most workers builds run at once, on connections of their own (each
// running the preamble first), each build in its own transaction, as in
// BuildPostData. The first failure stops the other builds and is handed
// to fail, so that the copy can stop too, and returned by Finish.
type EarlyBuilds struct {
	preamble string
	connect  Connect
	log      zerolog.Logger
	fail     func(error)
	ctx      context.Context
	cancel   context.CancelFunc
	entries  []Entry
	jobs     chan int // indexes into entries
	workers  int
	wg       sync.WaitGroup

	mu       sync.Mutex
	byTable  map[Object][]int // builds of tables not yet copied
	queued   int
	started  int // workers started
	done     []bool
	finished bool
	err      error
}

// StartEarlyBuilds prepares the early builds of entries; nothing runs
// before the first Copied. fail (may be nil) hears of the first failure.
func StartEarlyBuilds(ctx context.Context, preamble string, entries []Entry, workers int, connect Connect, fail func(error), log zerolog.Logger) *EarlyBuilds {
	b := &EarlyBuilds{preamble: preamble, connect: connect, log: log, fail: fail, entries: entries,
		jobs: make(chan int, len(entries)), workers: max(workers, 1), byTable: map[Object][]int{}, done: make([]bool, len(entries))}
	b.ctx, b.cancel = context.WithCancel(ctx)
	for i, e := range entries {
		if t, ok := e.Table(); ok {
			b.byTable[t] = append(b.byTable[t], i)
		}
	}
	return b
}

// Copied says that table's copy has committed: its builds are queued.
func (b *EarlyBuilds) Copied(table Object) {
	b.mu.Lock()
	defer b.mu.Unlock()
	idx := b.byTable[table]
	if len(idx) == 0 || b.finished || b.err != nil {
		return
	}
	delete(b.byTable, table)
	for _, i := range idx {
		b.jobs <- i
		b.queued++
		if b.started < min(b.workers, b.queued) {
			b.started++
			b.wg.Go(b.work)
		}
	}
	b.log.Info().Str("table", table.Schema+"."+table.Name).Int("index_builds", len(idx)).
		Msg("schema: building the table's indexes now that it is copied")
}

// work runs queued builds on a connection of its own until Finish.
func (b *EarlyBuilds) work() {
	conn, closeConn, err := b.connect(b.ctx)
	if err == nil {
		defer closeConn()
		err = RunPreamble(b.ctx, conn, b.preamble)
	}
	for err == nil {
		i, ok := <-b.jobs
		if !ok {
			return
		}
		if err = runEntry(b.ctx, conn, b.entries[i], b.log); err == nil {
			b.mu.Lock()
			b.done[i] = true
			b.mu.Unlock()
		}
	}
	if b.ctx.Err() != nil {
		return // stopped by another's failure or by the caller: not a failure of its own
	}
	b.cancel()
	b.mu.Lock()
	b.err = err
	b.mu.Unlock()
	if b.fail != nil {
		b.fail(err)
	}
}

// Finish waits for the builds under way and returns the entries left for
// BuildPostData, in the section's order: every one that did not run here
// to its end. A build's failure is returned instead, and so is the
// cancellation of ctx.
func (b *EarlyBuilds) Finish() ([]Entry, error) {
	b.mu.Lock()
	b.finished = true
	close(b.jobs)
	b.mu.Unlock()
	b.wg.Wait()
	err := b.ctx.Err()
	b.cancel()
	if b.err != nil {
		return nil, b.err
	}
	if err != nil {
		return nil, err
	}
	var rest []Entry
	for i, e := range b.entries {
		if !b.done[i] {
			rest = append(rest, e)
		}
	}
	return rest, nil
}
