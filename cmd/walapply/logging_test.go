package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY returns the two ends of a new pseudo-terminal: the terminal a
// program writes to (a *os.File for which isatty is true) and what it
// wrote.
func openPTY(t *testing.T) (term *os.File, output io.Reader) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	term, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { term.Close() })
	return term, master
}

// readLine reads from r until a newline (a terminal's output ends lines
// with \r\n).
func readLine(t *testing.T, r io.Reader) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		var b bytes.Buffer
		one := make([]byte, 1)
		for {
			if _, err := r.Read(one); err != nil || one[0] == '\n' {
				got <- b.String()
				return
			}
			b.Write(one)
		}
	}()
	select {
	case s := <-got:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("nothing read from the terminal")
		return ""
	}
}

var escapeCode = regexp.MustCompile("\x1b\\[")

// Colours only on a terminal, never with NO_COLOR set; a console log to a
// pipe or file has no escape codes; "auto" to a pipe is JSON with
// millisecond times in UTC and durations in seconds.
func TestLogColoursAndFormat(t *testing.T) {
	t.Run("terminal", func(t *testing.T) {
		t.Setenv("NO_COLOR", "")
		term, out := openPTY(t)
		log, err := newLogger(term, "auto", "info")
		if err != nil {
			t.Fatal(err)
		}
		log.Warn().Str("relation", "public.t").Msg("hello")
		if line := readLine(t, out); !escapeCode.MatchString(line) || !strings.Contains(line, "hello") {
			t.Errorf("console log on a terminal without NO_COLOR: %q, want colours", line)
		}
	})
	t.Run("terminal with NO_COLOR", func(t *testing.T) {
		t.Setenv("NO_COLOR", "1")
		term, out := openPTY(t)
		log, err := newLogger(term, "console", "info")
		if err != nil {
			t.Fatal(err)
		}
		log.Warn().Str("relation", "public.t").Msg("hello")
		if line := readLine(t, out); escapeCode.MatchString(line) || !strings.Contains(line, "hello") {
			t.Errorf("console log on a terminal with NO_COLOR=1: %q, want no escape codes", line)
		}
	})
	t.Run("console to a pipe", func(t *testing.T) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		log, err := newLogger(w, "console", "info")
		if err != nil {
			t.Fatal(err)
		}
		log.Warn().Str("relation", "public.t").Msg("hello")
		w.Close()
		b, _ := io.ReadAll(r)
		if escapeCode.Match(b) || !strings.Contains(string(b), "relation=public.t") {
			t.Errorf("--log-format console to a pipe: %q, want no escape codes", b)
		}
	})
	t.Run("auto to a pipe", func(t *testing.T) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		log, err := newLogger(w, "auto", "info")
		if err != nil {
			t.Fatal(err)
		}
		log.Info().Dur("some_seconds", 1500*time.Millisecond).Msg("hello")
		w.Close()
		b, _ := io.ReadAll(r)
		var rec struct {
			Time    string  `json:"time"`
			Seconds float64 `json:"some_seconds"`
		}
		if err := json.Unmarshal(b, &rec); err != nil {
			t.Fatalf("--log-format auto to a pipe: %q is not JSON: %v", b, err)
		}
		if !jsonLogTime.MatchString(rec.Time) || rec.Seconds != 1.5 {
			t.Errorf("JSON record %s: want a UTC time with milliseconds and Dur in seconds", b)
		}
	})
}

// jsonLogTime is RFC 3339 in UTC with milliseconds.
var jsonLogTime = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)
