package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/walapply/walapply/apply"
)

func init() {
	register("sequences", command{summary: "set the target's sequences from the source's current values (for the cut-over)", run: func(ctx context.Context, args []string) error {
		return sequencesMain(ctx, args, os.Stdout)
	}})
}

// sequencesMain is 'walapply sequences': it prints one line per sequence
// set, "schema.name last_value is_called".
func sequencesMain(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlagSet("sequences")
	var o apply.SequenceOptions
	var pubs, schemas string
	fs.StringVar(&o.Source, "source", "", "source connection string")
	fs.StringVar(&o.Target, "target", "", "target connection string")
	fs.StringVar(&pubs, "publication", "", "set the sequences owned by columns of these publications' tables (comma-separated)")
	fs.StringVar(&schemas, "schema", "", "set every sequence in these schemas (comma-separated); with neither --publication nor --schema: every sequence outside the system schemas")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: walapply sequences --source URL --target URL [--publication P] [--schema S]\n\n"+
			"Sets each selected sequence on the target to the source's current value, so that the\n"+
			"target's next value is the one the source would give out next. Run it for the cut-over,\n"+
			"after writes on the source have stopped and the applier has caught up.\n\n")
		writeFlags(fs.Output(), fs)
	}
	if err := parseWithEnv(fs, args, "source", "target"); err != nil {
		return err
	}
	o.Publications, o.Schemas = splitList(pubs), splitList(schemas)
	set, err := apply.SyncSequences(ctx, o)
	if err != nil {
		return err
	}
	for _, s := range set {
		fmt.Fprintf(out, "%s %d %t\n", s, s.LastValue, s.IsCalled)
	}
	fmt.Fprintf(out, "%d sequence(s) set\n", len(set))
	return nil
}
