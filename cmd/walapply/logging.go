package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
)

// jsonTimeFormat is RFC 3339 with milliseconds.
const jsonTimeFormat = "2006-01-02T15:04:05.000Z07:00"

// newLogger logs JSON lines, or readable console lines when w is a
// terminal (format "auto"), or as format says ("json", "console").
//
// The log's conventions (README "Logging"):
//
//   - JSON lines by default when stderr is not a terminal; "time" is
//     RFC 3339 in UTC with milliseconds (2026-12-01T15:20:04.123Z).
//   - Console lines on a terminal; colours only when the output is a
//     terminal and NO_COLOR is not set (https://no-color.org), so a console
//     log redirected to a file has no escape codes.
//   - A duration is a number of seconds in a field whose name ends in
//     _seconds (retry_in_seconds, lag_seconds), as in the metrics.
//   - A position is an LSN under the name the metrics use: received_lsn,
//     applied_lsn, confirmed_lsn (confirmed to the source: durable on the
//     target), commit_lsn.
//   - A relation is schema.name, unquoted (as PostgreSQL's own messages
//     name relations), under "relation".
//   - walapply run's every line carries "applier", the applier's name.
func newLogger(w io.Writer, format, level string) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || level == "" {
		return zerolog.Logger{}, fmt.Errorf("--log-level %q: want trace, debug, info, warn or error", level)
	}
	console, err := logsConsole(w, format)
	if err != nil {
		return zerolog.Logger{}, err
	}
	// The time format is a global of zerolog's; walapply sets it here,
	// once the process knows it logs.
	zerolog.TimeFieldFormat = jsonTimeFormat
	zerolog.TimestampFunc = func() time.Time { return time.Now().UTC() }
	zerolog.DurationFieldUnit = time.Second
	out := w
	if printed != nil {
		out = printed.Writer(out)
	}
	if console {
		noColor := os.Getenv("NO_COLOR") != "" || !isTerminal(w)
		out = zerolog.ConsoleWriter{Out: out, TimeFormat: time.TimeOnly, TimeLocation: time.Local, NoColor: noColor}
	}
	return zerolog.New(out).Level(lvl).With().Timestamp().Logger(), nil
}

// logsConsole says whether format (auto, json, console) writes console
// lines to w.
func logsConsole(w io.Writer, format string) (bool, error) {
	switch format {
	case "auto":
		return isTerminal(w), nil
	case "console":
		return true, nil
	case "json":
		return false, nil
	}
	return false, fmt.Errorf("--log-format %q: want auto, json or console", format)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}
