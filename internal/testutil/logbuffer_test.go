package testutil

import (
	"fmt"
	"testing"
)

func TestLogBuffer(t *testing.T) {
	var l LogBuffer
	fmt.Fprintf(&l, "a b\nb c\n")
	fmt.Fprintf(&l, "a c b\n")
	if n := l.Count("a", "b"); n != 2 {
		t.Errorf("Count(a, b) = %d, want 2", n)
	}
	if n := l.Count(); n != 3 {
		t.Errorf("Count() = %d, want 3 (every non-empty line)", n)
	}
	if line, ok := l.Line("c", "b"); !ok || line != "b c" {
		t.Errorf("Line(c, b) = %q, %v", line, ok)
	}
	if _, ok := l.Line("d"); ok {
		t.Error("Line(d) found a line")
	}
	if s := l.String(); s != "a b\nb c\na c b\n" {
		t.Errorf("String() = %q", s)
	}
}
