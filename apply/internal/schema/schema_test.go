package schema

import (
	"strings"
	"testing"
)

func TestPattern(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{[]string{"public", "t"}, `"public"."t"`},
		{[]string{"Other Sch", `Odd "Table"`}, `"Other Sch"."Odd ""Table"""`},
		{[]string{"s", "a*b?.c"}, `"s"."a*b?.c"`}, // literal inside quotes
	} {
		if got := Pattern(tc.names...); got != tc.want {
			t.Errorf("Pattern(%q) = %s, want %s", tc.names, got, tc.want)
		}
	}
}

func TestWithoutPassword(t *testing.T) {
	for _, tc := range []struct{ in, want, password string }{
		{"postgres://u:s3cr%40t@h:5432/db?sslmode=disable", "postgres://u@h:5432/db?sslmode=disable", "s3cr@t"},
		{"postgres://u@h/db?password=pw1234&sslmode=disable", "postgres://u@h/db?sslmode=disable", "pw1234"},
		{"host=h user=u password='it\\'s secret' dbname=db", "host='h' user='u' dbname='db'", "it's secret"},
		{"host=h password=plain dbname='my db'", "host='h' dbname='my db'", "plain"},
		{"host=h jit=off statement_cache_capacity=0 sslmode=disable", "host='h' sslmode='disable'", ""},
		{"postgres://u@h/db?sslmode=require&default_query_exec_mode=simple_protocol", "postgres://u@h/db?sslmode=require", ""},
	} {
		got, pw, err := withoutPassword(tc.in)
		if err != nil {
			t.Errorf("withoutPassword(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("withoutPassword(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if tc.password != "" && pw != tc.password {
			t.Errorf("withoutPassword(%q) password %q, want %q", tc.in, pw, tc.password)
		}
		if strings.Contains(got, "secret") || strings.Contains(got, "pw1234") || strings.Contains(got, "plain") {
			t.Errorf("withoutPassword(%q) = %q keeps the password", tc.in, got)
		}
	}
}

func TestParseDump(t *testing.T) {
	script := "--\n-- PostgreSQL database dump\n--\n\n\\restrict abc\n\nSET statement_timeout = 0;\nSELECT pg_catalog.set_config('search_path', '', false);\n\n" +
		"--\n-- Name: mood; Type: TYPE; Schema: app; Owner: -\n--\n\nCREATE TYPE app.mood AS ENUM (\n    'sad'\n);\n\n" +
		"--\n-- Name: Odd \"Table\" touch; Type: TRIGGER; Schema: Other Sch; Owner: -\n--\n\nCREATE TRIGGER touch BEFORE UPDATE ON x FOR EACH ROW EXECUTE FUNCTION app.touch();\n\n\\unrestrict abc\n"
	pre, entries := Parse(script)
	if strings.Contains(pre, `\restrict`) || !strings.Contains(pre, "SET statement_timeout = 0;") || !strings.Contains(pre, "set_config") {
		t.Errorf("preamble %q", pre)
	}
	if len(entries) != 2 {
		t.Fatalf("entries %+v", entries)
	}
	if e := entries[0]; e.Name != "mood" || e.Kind != "TYPE" || e.Schema != "app" || !strings.Contains(e.SQL, "CREATE TYPE app.mood AS ENUM (\n    'sad'\n);") {
		t.Errorf("entry 0 %+v", e)
	}
	if e := entries[1]; e.Name != `Odd "Table" touch` || e.Kind != "TRIGGER" || e.Schema != "Other Sch" || strings.Contains(e.SQL, `\unrestrict`) {
		t.Errorf("entry 1 %+v", e)
	}
}
