package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/walapply/walapply/apply"
)

func init() {
	register("compare", command{summary: "compare the published tables' rows on the source and the target (for the cut-over)", run: func(ctx context.Context, args []string) error {
		return compareMain(ctx, args, os.Stdout)
	}})
}

// compareMain is 'walapply compare'. Its exit status: 0 every table equal,
// 1 a table differs, 2 it could not compare (a usage or other error).
func compareMain(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlagSet("compare")
	var c apply.CompareConfig
	var pubs string
	var asJSON bool
	fs.StringVar(&c.Source, "source", "", "source connection string")
	fs.StringVar(&c.Target, "target", "", "target connection string")
	fs.StringVar(&pubs, "publication", "", "compare the tables of these publications (comma-separated; default: every publication on the source)")
	fs.IntVar(&c.Jobs, "jobs", 4, "connections per side: how many tables are read at once on each")
	fs.IntVar(&c.Keys, "keys", 0, "list up to this many differing primary keys per table that differs (each side then sorts that table by its key)")
	fs.BoolVar(&asJSON, "json", false, "print one JSON object instead of text")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: walapply compare --source URL --target URL [--publication P] [--jobs N] [--keys N] [--json]\n\n"+
			"For every published table, counts the rows and computes an order-independent checksum\n"+
			"of them on each side (on the servers, each side in one snapshot shared by its --jobs\n"+
			"connections) and says whether the table is equal. Only the source's published columns\n"+
			"count, by name: other column orders and extra columns on the target are fine.\n\n"+
			"Meant for the cut-over, once writes on the source have stopped and the applier has\n"+
			"caught up (walapply run --until now), and for spot checks: on a source being written\n"+
			"to, tables the applier has not caught up with show as different.\n\n"+
			"Exit status: 0 every table equal, 1 a table differs, 2 usage or other errors.\n\n")
		writeFlags(fs.Output(), fs)
	}
	if err := parseWithEnv(fs, args, "source", "target"); err != nil {
		return err // a usage error or -h: exit 2 or 0 (main.go)
	}
	if c.Jobs < 1 || c.Keys < 0 {
		return &usageError{msg: "--jobs must be at least 1 and --keys at least 0"}
	}
	c.Publications = splitList(pubs)
	rep, err := apply.Compare(ctx, c)
	if err != nil {
		return exitError{2, err}
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return exitError{2, err}
		}
	} else {
		writeCompareText(out, rep)
	}
	if !rep.Equal {
		n := 0
		for _, t := range rep.Tables {
			if !t.Equal {
				n++
			}
		}
		return exitError{1, fmt.Errorf("%d of %d tables differ", n, len(rep.Tables))}
	}
	return nil
}

// writeCompareText prints a line per table, the differing keys under it,
// then a summary.
func writeCompareText(w io.Writer, rep apply.CompareReport) {
	equal := 0
	for _, t := range rep.Tables {
		switch {
		case t.Equal:
			equal++
			fmt.Fprintf(w, "equal      %s: %d rows\n", t, t.Source.Rows)
		case t.Reason != "" && len(t.Keys) == 0 && t.Target == (apply.TableDigest{}):
			fmt.Fprintf(w, "DIFFERENT  %s: %s\n", t, t.Reason)
		default:
			fmt.Fprintf(w, "DIFFERENT  %s: %d rows on the source, %d on the target", t, t.Source.Rows, t.Target.Rows)
			if t.Source.Rows == t.Target.Rows {
				fmt.Fprint(w, ", checksums differ")
			}
			if t.Reason != "" {
				fmt.Fprintf(w, "; %s", t.Reason)
			}
			fmt.Fprintln(w)
		}
		for _, k := range t.Keys {
			fmt.Fprintf(w, "    %-8s %s\n", k.Kind, k.Key)
		}
	}
	fmt.Fprintf(w, "%d tables: %d equal, %d different\n", len(rep.Tables), equal, len(rep.Tables)-equal)
}
