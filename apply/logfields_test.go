package apply

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestLogRelationFields: every log field that names relations is
// "relation" (or "relations" for a list) and holds them unquoted
// (sqlgen.LogRelation, sqlgen.LogRelations, relmap.Entry.LogName), so that a JSON log has no
// escaped quotes in it and one word for one concept; "table" and "tables"
// are not used as field names.
func TestLogRelationFields(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	field := regexp.MustCompile(`\.(?:Str|Stringer|Strs)\("(relations?|tables?)", ([^)]*\)?)`)
	seen := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range field.FindAllStringSubmatch(string(src), -1) {
			seen++
			if strings.HasPrefix(m[1], "table") {
				t.Errorf("%s: log field %q: name it relation(s)", f, m[0])
			} else if !strings.Contains(m[2], "sqlgen.LogRelation(") && !strings.Contains(m[2], "sqlgen.LogRelations(") && !strings.Contains(m[2], "LogName()") {
				t.Errorf("%s: log field %q: give it sqlgen.LogRelation, sqlgen.LogRelations or LogName(), unquoted", f, m[0])
			}
		}
	}
	if seen == 0 {
		t.Fatal("no relation log fields found: the pattern is out of date")
	}
}
