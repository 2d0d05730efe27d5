package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/apply"
)

// tableStatus is one table an applier knows (walapply.copy_state), as
// pg_subscription_rel lists a subscription's tables.
type tableStatus struct {
	Schema string `json:"schema"`
	Name   string `json:"name"`
	// State is "pending" (to be copied), "copied" (copied while the
	// stream went on, its changes meanwhile not applied yet), "done"
	// (copied and following the stream), "existing" (there at
	// the first start of an applier without --copy: the target was
	// filled otherwise) or "not_copied" (published later to an applier
	// without --copy: its changes are applied, its earlier rows were
	// never copied).
	State string `json:"state"`
	// Published is false for a table no longer in the publications: its
	// changes are no longer applied, its rows on the target stay.
	Published bool       `json:"published"`
	CopyLSN   string     `json:"copy_lsn,omitempty"` // the snapshot's position a copied table was read at
	Rows      *int64     `json:"rows,omitempty"`     // rows copied
	CopiedAt  *time.Time `json:"copied_at,omitempty"`
	AddedAt   time.Time  `json:"added_at"`
	// Copying is the progress of a 'pending' table's copy running now
	// (status_progress.go); nil when none runs or none can be seen.
	Copying *tableProgress `json:"copying,omitempty"`
	// RangesDone of RangesTotal: a table copied in ranges
	// (walapply.copy_ranges, --copy-split-size); 0 of 0 for the others.
	RangesDone  int `json:"ranges_done,omitempty"`
	RangesTotal int `json:"ranges_total,omitempty"`
}

// tableStatusesOf are the tables the target records for an applier.
func tableStatusesOf(ts []apply.RegisteredTable) []tableStatus {
	out := make([]tableStatus, 0, len(ts))
	for _, t := range ts {
		out = append(out, tableStatus{Schema: t.Schema, Name: t.Name, State: t.State, Published: t.Published, CopyLSN: t.CopyLSN,
			Rows: t.Rows, CopiedAt: t.CopiedAt, AddedAt: t.AddedAt, RangesDone: t.RangesDone, RangesTotal: t.RangesTotal})
	}
	return out
}

// tableStateText says what a table's state means, for the text output.
func tableStateText(t tableStatus) string {
	var s string
	switch t.State {
	case "pending":
		s = "copy pending (the applier is copying it, or copies it when it starts)"
		if t.Copying != nil {
			s = copyingText(t.Copying)
		}
	case "copied":
		s = "copied at " + t.CopyLSN + ", catching up with the stream"
	case "done":
		s = "copied at " + t.CopyLSN
		if t.Rows != nil {
			s += fmt.Sprintf(" (%s)", plural(int(*t.Rows), "row"))
		}
	case "existing":
		s = "streaming (published at the applier's first start; not copied by walapply)"
	case "not_copied":
		s = "published, not copied: its changes are applied, its earlier rows are not on the target (the applier was not started with --copy)"
	default:
		s = t.State
	}
	switch {
	case t.RangesTotal == 0:
	case t.RangesDone < t.RangesTotal:
		s += fmt.Sprintf(", %d/%d ranges done", t.RangesDone, t.RangesTotal)
	default:
		s += fmt.Sprintf(", in %d ranges", t.RangesTotal)
	}
	if !t.Published {
		s = "NO LONGER PUBLISHED (its changes are not applied, its rows stay); was " + s
	}
	return s
}

// writeTablesText prints an applier's tables.
func writeTablesText(line func(label, format string, a ...any), tables []tableStatus) {
	if len(tables) == 0 {
		line("tables", "none recorded yet (the applier records them when it starts)")
		return
	}
	count := map[string]int{}
	published := 0
	for _, t := range tables {
		if t.Published {
			published++
			count[t.State]++
		}
	}
	var parts []string
	for _, st := range []struct{ state, text string }{
		{"done", "copied"}, {"copied", "catching up"}, {"pending", "copy pending"}, {"existing", "not copied by walapply"}, {"not_copied", "published, not copied"},
	} {
		if n := count[st.state]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, st.text))
		}
	}
	summary := plural(published, "published table")
	if len(parts) > 0 {
		summary += ": " + strings.Join(parts, ", ")
	}
	if n := len(tables) - published; n > 0 {
		summary += fmt.Sprintf("; %d no longer published", n)
	}
	line("tables", "%s", summary)
	for _, t := range tables {
		line("", "%s  %s", quoteQualified(t.Schema, t.Name), tableStateText(t))
	}
}

// quoteQualified prints schema.name, each part quoted.
func quoteQualified(schema, name string) string {
	return pgx.Identifier{schema, name}.Sanitize()
}
