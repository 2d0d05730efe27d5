package testutil

import (
	"bytes"
	"strings"
	"sync"
)

// LogBuffer is a log sink a test reads back: an io.Writer safe for the
// logger's goroutines and the test at once (zerolog.New(&buf), a child
// process's output). The zero value is ready to use.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Count returns how many lines contain every fragment.
func (l *LogBuffer) Count(frags ...string) int {
	n := 0
	for _, line := range strings.Split(l.String(), "\n") {
		if matches(line, frags) {
			n++
		}
	}
	return n
}

// Line returns the first line that contains every fragment.
func (l *LogBuffer) Line(frags ...string) (string, bool) {
	for _, line := range strings.Split(l.String(), "\n") {
		if matches(line, frags) {
			return line, true
		}
	}
	return "", false
}

func matches(line string, frags []string) bool {
	if line == "" {
		return false
	}
	for _, f := range frags {
		if !strings.Contains(line, f) {
			return false
		}
	}
	return true
}
