package apply_test

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/walapply/walapply/apply"
	"github.com/walapply/walapply/internal/testutil"
	"github.com/walapply/walapply/testenv"
)

// TestCopyFormats copies typeMatrix's awkward values with the copy
// format chosen per table (binary where the types allow) and with text
// forced: the target must hold exactly the source's rows either way, and
// the log must show which tables went binary. types_bin has only the
// matrix's built-in types and the enum, so it goes binary; types_text adds
// a domain, a composite, an array of the enum and an extension's type, and
// widened has columns whose target type differs (int into bigint, varchar
// into text): both fall back to text. And once from the oldest version
// selected to the newest.
func TestCopyFormats(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		for _, format := range []string{apply.CopyFormatAuto, apply.CopyFormatText} {
			t.Run(format, func(t *testing.T) { testCopyFormat(t, newHarness(t, version, nil, nil), format) })
		}
	})
	// Binary forms across major versions: from the oldest selected
	// source to the newest target.
	versions, err := testenv.Versions()
	if err != nil {
		t.Fatal(err)
	}
	if oldest, newest := slices.Min(versions), slices.Max(versions); oldest != newest {
		t.Run(fmt.Sprintf("pg%dto%d", oldest, newest), func(t *testing.T) {
			h := &harness{t: t, ctx: context.Background(), pair: &testenv.Pair{
				Source: testenv.NewCluster(t, testenv.Options{Version: oldest}),
				Target: testenv.NewCluster(t, testenv.Options{Version: newest}),
			}}
			testCopyFormat(t, h, apply.CopyFormatAuto)
		})
	}
}

func testCopyFormat(t *testing.T, h *harness, format string) {
	h.both(`CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')`, `CREATE DOMAIN posint AS int CHECK (VALUE > 0)`,
		`CREATE TYPE pair AS (a int, b text)`, `CREATE EXTENSION IF NOT EXISTS citext`)
	all := append(typeMatrix(), typeCase{"mood[]", []string{"'{happy,sad}'"}}, typeCase{"citext", []string{"'MiXeD'"}})
	var bin, text []typeCase
	for _, c := range all {
		text = append(text, c)
		switch c.typ {
		case "posint", "pair", "mood[]", "citext":
		default:
			bin = append(bin, c)
		}
	}
	tables := map[string][]typeCase{"types_bin": bin, "types_text": text}
	for _, name := range []string{"types_bin", "types_text"} {
		cases := tables[name]
		var cols []string
		for i, c := range cases {
			cols = append(cols, fmt.Sprintf("c%d %s", i, c.typ))
		}
		h.both(`CREATE TABLE ` + name + ` (id int PRIMARY KEY, ` + strings.Join(cols, ", ") + `)`)
		maxVals := 0
		for _, c := range cases {
			maxVals = max(maxVals, len(c.values))
		}
		for row := range maxVals {
			var vals []string
			for _, c := range cases {
				vals = append(vals, c.values[row%len(c.values)])
			}
			h.source(fmt.Sprintf("INSERT INTO %s VALUES (%d, %s)", name, row, strings.Join(vals, ", ")))
		}
		h.source(fmt.Sprintf("INSERT INTO %s (id) VALUES (-1)", name))
	}
	h.source(`CREATE TABLE widened (id int PRIMARY KEY, n int, s varchar(10))`,
		`INSERT INTO widened SELECT g, g * 1000, 'v' || g FROM generate_series(1, 100) g`,
		`CREATE PUBLICATION pub FOR TABLE types_bin, types_text, widened`)
	h.target(`CREATE TABLE widened (id int PRIMARY KEY, n bigint, s text)`)

	cfg := h.config("formats", "pub")
	cfg.Copy, cfg.CopyFormat = true, format
	var log testutil.LogBuffer
	cfg.Logger = zerolog.New(zerolog.MultiLevelWriter(zerolog.NewTestWriter(t), &log)).Level(zerolog.DebugLevel)
	stop := h.runApplier(cfg)
	h.waitCopyDone(time.Minute, nil)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for name, cases := range tables {
		for i := range cases {
			h.compare(fmt.Sprintf("SELECT id::text || ' ' || COALESCE(c%d::text, 'NULL') FROM %s", i, name))
		}
	}
	if n := h.compare(tableRows("widened", "")); n != 100 {
		t.Errorf("widened: %d rows compared, want 100", n)
	}

	want := map[string]string{"types_bin": "binary", "types_text": "text", "widened": "text"}
	if format == apply.CopyFormatText {
		want["types_bin"] = "text"
	}
	got := map[string]string{}
	re := regexp.MustCompile(`"relation":"public\.(\w+)"[^\n]*"format":"(\w+)"[^\n]*"message":"copied table"`)
	for _, m := range re.FindAllStringSubmatch(log.String(), -1) {
		got[m[1]] = m[2]
	}
	for table, f := range want {
		if got[table] != f {
			t.Errorf("%s copied in format %q, want %s (copied tables: %v)", table, got[table], f, slices.Sorted(maps.Keys(got)))
		}
	}
}
