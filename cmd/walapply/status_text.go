package main

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"
)

// writeStatusText prints the report for a person, one block per applier.
func writeStatusText(w io.Writer, rep *statusReport, now time.Time) error {
	b := bufio.NewWriter(w)
	line := func(label, format string, a ...any) {
		fmt.Fprintf(b, "  %-18s %s\n", label, fmt.Sprintf(format, a...))
	}
	if len(rep.Appliers) == 0 {
		fmt.Fprintln(b, "no appliers recorded on the target (walapply.appliers is empty)")
	}
	for i, a := range rep.Appliers {
		if i > 0 {
			fmt.Fprintln(b)
		}
		fmt.Fprintf(b, "applier %s\n", a.Name)
		line("slot", "%s, publications %s", a.Slot, strings.Join(a.Publications, ", "))
		line("source cluster", "system id %s, timeline %d", a.SourceSystemID, a.SourceTimeline)
		switch {
		case !a.Origin.Exists:
			line("origin", "%s does not exist on the target", a.Origin.Name)
		case a.Origin.Progress == "":
			line("origin", "%s: nothing applied yet", a.Origin.Name)
		case a.Origin.LocalLSN != "":
			line("origin", "%s: applied up to source %s (target commit at %s)", a.Origin.Name, a.Origin.Progress, a.Origin.LocalLSN)
		default:
			line("origin", "%s: applied up to source %s", a.Origin.Name, a.Origin.Progress)
		}
		if len(a.Sessions) == 0 {
			line("running", "no (no session of the applier on the target)")
		} else {
			var parts []string
			for _, s := range a.Sessions {
				parts = append(parts, fmt.Sprintf("%s pid %d since %s", s.Role, s.PID, s.Since.UTC().Format(time.DateTime)))
			}
			line("running", "yes: %s", strings.Join(parts, ", "))
		}
		writeSourceText(line, a.Source)
		switch u := a.Until; {
		case u == nil:
		case u.ReachedAt != nil:
			line("until", "reached %s at %s: stopped with every source transaction committed at or before it applied", u.LSN, u.ReachedAt.UTC().Format(time.DateTime))
		default:
			line("until", "%s, not reached yet", u.LSN)
		}
		switch c := a.Copy; {
		case c == nil:
			line("initial copy", "none made (the target was filled otherwise)")
		case c.Complete:
			line("initial copy", "complete: %d tables, %d rows, finished %s", c.Tables, c.Rows, c.FinishedAt.UTC().Format(time.DateTime))
		case c.FinishedAt != nil:
			line("initial copy", "finished %s; %d of %d tables copied (%d rows), the others were published since and are copied when the applier starts",
				c.FinishedAt.UTC().Format(time.DateTime), c.TablesDone, c.Tables, c.Rows)
		case copying(a) > 0:
			line("initial copy", "RUNNING: %d of %d tables done (%d rows), %d being copied now (below)", c.TablesDone, c.Tables, c.Rows, copying(a))
		case copySessions(a):
			line("initial copy", "RUNNING: %d of %d tables done (%d rows); the progress of the tables being copied shows to the applier's own target role (or one with pg_read_all_stats)", c.TablesDone, c.Tables, c.Rows)
		default:
			line("initial copy", "INCOMPLETE: %d of %d tables done (%d rows); run walapply run --copy again to finish it", c.TablesDone, c.Tables, c.Rows)
		}
		writeTablesText(line, a.Tables) // status_tables.go
		if len(a.Prepared) == 0 {
			line("prepared", "none pending on the target")
		} else {
			line("prepared", "%d pending on the target:", len(a.Prepared))
			for _, p := range a.Prepared {
				fmt.Fprintf(b, "    %s  source xid %d, prepared %s (%s ago) by %s in %s\n", p.GID, p.SourceXid,
					p.Prepared.UTC().Format(time.DateTime), age(now, p.Prepared), p.Owner, p.Database)
			}
		}
	}
	if s := rep.Spill; s != nil {
		fmt.Fprintln(b)
		switch {
		case !s.Exists:
			fmt.Fprintf(b, "spill directory %s does not exist (nothing spilled since it was set)\n", s.Dir)
		case len(s.Files) == 0:
			fmt.Fprintf(b, "spill directory %s: no spill files\n", s.Dir)
		default:
			fmt.Fprintf(b, "spill directory %s: %s, %s\n", s.Dir, plural(len(s.Files), "file"), bytesText(s.Bytes))
			for _, f := range s.Files {
				fmt.Fprintf(b, "    %-22s %10s  modified %s ago\n", f.Name, bytesText(f.Bytes), age(now, f.Modified))
			}
		}
	}
	return b.Flush()
}

// writeSourceText prints the source side of an applier.
func writeSourceText(line func(label, format string, a ...any), s *sourceStatus) {
	if s == nil {
		line("source", "not asked (give --source for the slot's lag)")
		return
	}
	if s.SystemIDMatches != nil && !*s.SystemIDMatches {
		line("source", "WRONG CLUSTER: system id %s, not the applier's source", s.SystemID)
	}
	if s.Slot == nil {
		line("slot on source", "slot missing on the source (source WAL at %s)", s.CurrentLSN)
		return
	}
	sl := s.Slot
	state := "inactive (no applier connected)"
	if sl.Active {
		state = "active"
		if sl.ActivePID != nil {
			state += fmt.Sprintf(" (walsender pid %d)", *sl.ActivePID)
		}
	}
	line("slot on source", "%s, plugin %s, database %s", state, sl.Plugin, sl.Database)
	if sl.Failover != nil {
		line("failover", "%s", failoverText(sl)) // status_failover.go
	}
	lag := "unknown"
	if sl.LagBytes != nil {
		lag = bytesText(*sl.LagBytes)
	}
	line("lag", "%s, %s (confirmed_lsn %s, source at %s)", lag, lagTimeText(sl), orNone(sl.ConfirmedFlushLSN), s.CurrentLSN) // status_lag.go
	if sl.RetainedBytes != nil {
		line("WAL retained", "%s from %s (wal_status %s)", bytesText(*sl.RetainedBytes), orNone(sl.RestartLSN), orNone(sl.WALStatus))
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// bytesText prints a size with a binary unit.
func bytesText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d bytes", n)
	}
	v, i := float64(n), -1
	for v >= unit && i < 4 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTP"[i])
}

// age is how long before now t was, rounded for reading.
func age(now, t time.Time) string {
	d := max(now.Sub(t), 0)
	if d < time.Hour {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

// plural prints n and a noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
