package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/walapply/walapply/internal/ddl"
	"github.com/walapply/walapply/internal/secret"
)

func init() {
	register("ddl", command{summary: "install or remove the DDL capture on the source (for run --ddl)", run: func(ctx context.Context, args []string) error {
		return ddlMain(ctx, args, os.Stdout)
	}})
}

// ddlMain is 'walapply ddl install|remove --source URL'.
func ddlMain(ctx context.Context, args []string, out io.Writer) error {
	action := ""
	if len(args) > 0 && (args[0] == "install" || args[0] == "remove") {
		action, args = args[0], args[1:]
	}
	fs := newFlagSet("ddl")
	var source string
	fs.StringVar(&source, "source", "", "source connection string (a superuser: event triggers)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: walapply ddl install|remove --source URL\n\n"+
			"install creates (or upgrades) on the source the event triggers and the walapply_ddl schema\n"+
			"that capture each DDL statement as a logical message for 'walapply run --ddl'; installing\n"+
			"twice is a no-op. remove drops them all. See README.md (--ddl) and docs/SECURITY.md.\n\n")
		writeFlags(fs.Output(), fs)
	}
	if err := parseWithEnv(fs, args, "source"); err != nil {
		return err
	}
	if action == "" {
		return &usageError{msg: "say what to do: walapply ddl install --source URL, or walapply ddl remove --source URL"}
	}
	conn, err := pgx.Connect(ctx, source)
	if err != nil {
		return fmt.Errorf("connecting to the source: %w", secret.Error(err, source))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if action == "install" {
		if err := ddl.Install(ctx, conn); err != nil {
			return secret.Error(err, source)
		}
		fmt.Fprintf(out, "DDL capture version %d installed on the source\n", ddl.Version)
		return nil
	}
	if err := ddl.Remove(ctx, conn); err != nil {
		return secret.Error(err, source)
	}
	fmt.Fprintln(out, "DDL capture removed from the source")
	return nil
}
