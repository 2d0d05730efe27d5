package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
)

// newLogger logs JSON lines, or readable console lines when w is a
// terminal (format "auto"), or as format says ("json", "console").
func newLogger(w io.Writer, format, level string) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || level == "" {
		return zerolog.Logger{}, fmt.Errorf("--log-level %q: want trace, debug, info, warn or error", level)
	}
	console := false
	switch format {
	case "auto":
		if f, ok := w.(*os.File); ok {
			console = isatty.IsTerminal(f.Fd())
		}
	case "console":
		console = true
	case "json":
	default:
		return zerolog.Logger{}, fmt.Errorf("--log-format %q: want auto, json or console", format)
	}
	if printed != nil {
		w = printed.Writer(w)
	}
	if console {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}
