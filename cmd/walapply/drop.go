package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/walapply/walapply/apply"
)

func init() {
	register("drop", command{summary: "remove an applier: its slot on the source, its origins, rows, prepared transactions and spill files", run: dropCmd})
}

func dropCmd(ctx context.Context, args []string) error {
	return dropMain(ctx, args, os.Stdout, os.Stderr)
}

// dropMain is the drop command with its output streams (apply.Drop does
// the work; see there). An applier of which nothing is left is not an
// error, like DROP SUBSCRIPTION IF EXISTS: a second drop succeeds.
func dropMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("drop")
	fs.SetOutput(stderr)
	var dc apply.DropConfig
	fs.StringVar(&dc.Target, "target", "", "target connection string")
	fs.StringVar(&dc.Name, "name", "", "the applier to drop")
	fs.StringVar(&dc.Source, "source", "", "source connection string, to drop the applier's slot there (without it the slot is left, and drop says how to drop it)")
	fs.BoolVar(&dc.KeepSlot, "keep-slot", false, "leave the applier's slot on the source")
	fs.StringVar(&dc.SpillDir, "spill-dir", "", "the applier's spill directory, if run was given one (default: run's default for --name and this target)")
	if err := parseWithEnv(fs, args, "target", "name"); err != nil {
		return err
	}
	rep, err := apply.Drop(ctx, dc)
	if rep != nil {
		writeDropReport(stdout, rep, err != nil)
	}
	return err
}

// writeDropReport prints what drop did; failed says it stopped on an error
// (printed by main).
func writeDropReport(w io.Writer, r *apply.DropReport, failed bool) {
	done := r.Slot.Dropped || len(r.Origins)+len(r.RolledBack)+len(r.Rows)+len(r.SpillFiles) > 0
	switch {
	case failed && !done:
		return
	case failed:
		fmt.Fprintf(w, "dropping applier %q stopped on an error; done before it:\n", r.Name)
	case !r.Found:
		others := "the target has no other applier"
		if len(r.Others) > 0 {
			q := make([]string, len(r.Others))
			for i, o := range r.Others {
				q[i] = strconv.Quote(o)
			}
			others = "the target has appliers " + strings.Join(q, ", ")
		}
		fmt.Fprintf(w, "nothing to drop: applier %q has no trace on this target (no row in the walapply schema, no replication origin, prepared transaction or spill file); %s\n", r.Name, others)
		return
	default:
		fmt.Fprintf(w, "applier %q dropped:\n", r.Name)
	}
	s := r.Slot
	switch {
	case s.Name == "":
		fmt.Fprintf(w, "  replication slot: none recorded on the target\n")
	case s.Dropped:
		fmt.Fprintf(w, "  replication slot %q dropped on the source\n", s.Name)
	case s.Missing:
		fmt.Fprintf(w, "  replication slot %q: already gone from the source\n", s.Name)
	case s.Left != "":
		fmt.Fprintf(w, "  replication slot %q left on the source (%s); it keeps WAL there until it is dropped: SELECT pg_drop_replication_slot('%s'); on the source\n", s.Name, s.Left, s.Name)
	}
	writeList(w, "replication origins dropped on the target", r.Origins)
	writeList(w, "prepared transactions rolled back on the target (they could never be finished: their COMMIT PREPARED would have come through the slot)", r.RolledBack)
	if len(r.Rows) > 0 {
		parts := make([]string, len(r.Rows))
		for i, t := range r.Rows {
			parts[i] = fmt.Sprintf("%s %d", t.Table, t.Rows)
		}
		writeList(w, "rows deleted from the walapply schema", parts)
	}
	if n := len(r.SpillFiles); n > 0 || r.SpillDirRemoved {
		fmt.Fprintf(w, "  spill files removed from %s: %d", r.SpillDir, n)
		if r.SpillDirRemoved {
			fmt.Fprintf(w, "; directory removed")
		}
		fmt.Fprintln(w)
	}
	writeList(w, "spill files left (not this applier's, or unreadable)", r.SpillLeft)
	if len(r.Unattributed) > 0 {
		fmt.Fprintf(w, "  prepared transactions left on the target: their GIDs are no applier's; if this applier ran with --gid-mode source, some may be its own and can never be finished now (ROLLBACK PREPARED 'gid' on the target):\n")
		for _, p := range r.Unattributed {
			fmt.Fprintf(w, "    %s  prepared %s by %s\n", p.GID, p.Prepared.UTC().Format(time.RFC3339), p.Owner)
		}
	}
}

// writeList prints a labelled list on one line, or nothing when it is empty.
func writeList(w io.Writer, label string, items []string) {
	if len(items) > 0 {
		fmt.Fprintf(w, "  %s: %s\n", label, strings.Join(items, ", "))
	}
}
