package schema

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Execer is the part of *pgx.Conn that running a script's entries needs.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Entry is one object of a pg_dump script: what its header comment names
// and its SQL.
type Entry struct {
	Name, Kind, Schema string // the header's Name, Type and Schema
	SQL                string
}

// IsBuild reports whether e builds an index or a constraint (INDEX and
// CONSTRAINT entries): the post-data entries that may run side by side,
// each on a connection of its own, before the rest.
func (e Entry) IsBuild() bool { return e.Kind == "INDEX" || e.Kind == "CONSTRAINT" }

var dumpHeader = regexp.MustCompile(`^-- Name: (.*); Type: ([A-Z ]+); Schema: (.*); Owner: `)

// Parse splits a plain pg_dump script into its preamble (the session
// settings every connection running the entries needs) and its entries.
// The psql meta-commands pg_dump writes (\restrict, \connect) are left out:
// the statements are sent to the server directly.
func Parse(script string) (preamble string, entries []Entry) {
	var cur *Entry
	var pre strings.Builder
	for _, line := range strings.SplitAfter(script, "\n") {
		if strings.HasPrefix(line, `\restrict `) || strings.HasPrefix(line, `\unrestrict `) || strings.HasPrefix(line, `\connect `) {
			continue
		}
		if m := dumpHeader.FindStringSubmatch(strings.TrimRight(line, "\n")); m != nil {
			entries = append(entries, Entry{Name: m[1], Kind: m[2], Schema: m[3]})
			cur = &entries[len(entries)-1]
			continue
		}
		if cur == nil {
			pre.WriteString(line)
		} else {
			cur.SQL += line
		}
	}
	return pre.String(), entries
}

// RunPreamble runs a pg_dump script's session settings one by one; a
// setting the target does not know (from a newer pg_dump) is skipped.
func RunPreamble(ctx context.Context, conn Execer, preamble string) error {
	for _, line := range strings.Split(preamble, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "--") {
			continue
		}
		if _, err := conn.Exec(ctx, line); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "42704" {
				continue
			}
			return fmt.Errorf("running pg_dump's session setting %q on the target: %w", line, err)
		}
	}
	return nil
}
