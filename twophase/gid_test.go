package twophase

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/walapply/walapply/testenv"
)

func TestTargetGID(t *testing.T) {
	long := strings.Repeat("a", MaxGIDLen-len(GIDPrefix)-len("_4294967295"))
	tests := []struct {
		name      string
		mode      Mode
		applier   string
		xid       uint32
		sourceGID string
		want      string
		wantErr   bool
	}{
		{"applier mode", GIDModeApplier, "main", 1234, "src gid", "walapply_main_1234", false},
		{"applier mode ignores the source GID", GIDModeApplier, "main", 7, "", "walapply_main_7", false},
		{"largest xid", GIDModeApplier, "a", 4294967295, "", "walapply_a_4294967295", false},
		{"quotes and non-ASCII in the applier", GIDModeApplier, `it's "ü"`, 5, "", `walapply_it's "ü"_5`, false},
		{"longest applier that fits", GIDModeApplier, long, 4294967295, "", GIDPrefix + long + "_4294967295", false},
		{"applier too long", GIDModeApplier, long + "a", 4294967295, "", "", true},
		{"empty applier", GIDModeApplier, "", 5, "", "", true},
		{"xid 0", GIDModeApplier, "main", 0, "", "", true},
		{"NUL in the applier", GIDModeApplier, "a\x00b", 5, "", "", true},
		{"invalid UTF-8 in the applier", GIDModeApplier, "a\xffb", 5, "", "", true},
		{"source mode keeps the GID", GIDModeSource, "main", 5, "order-42 'x' \\ ü", "order-42 'x' \\ ü", false},
		{"source mode, empty GID (PostgreSQL prepares '' too)", GIDModeSource, "main", 5, "", "", false},
		{"source mode, 199 bytes", GIDModeSource, "", 5, strings.Repeat("g", 199), strings.Repeat("g", 199), false},
		{"source mode, 200 bytes", GIDModeSource, "", 5, strings.Repeat("g", 200), "", true},
		{"source mode, NUL", GIDModeSource, "", 5, "a\x00", "", true},
		{"unknown mode", Mode(9), "main", 5, "g", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := TargetGID(tt.mode, tt.applier, tt.xid, tt.sourceGID)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidGID) {
					t.Fatalf("TargetGID = %q, %v; want ErrInvalidGID", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("TargetGID = %q, %v; want %q", got, err, tt.want)
			}
			if tt.mode == GIDModeApplier {
				xid, ok := ParseTargetGID(tt.applier, got)
				if !ok || xid != tt.xid {
					t.Fatalf("ParseTargetGID(%q, %q) = %d, %v; want %d, true", tt.applier, got, xid, ok, tt.xid)
				}
			}
		})
	}
}

func TestParseTargetGID(t *testing.T) {
	tests := []struct {
		applier, gid string
		xid          uint32
		ok           bool
	}{
		{"a", "walapply_a_15", 15, true},
		{"a_1", "walapply_a_1_5", 5, true},
		{"a", "walapply_a_1_5", 0, false}, // applier a_1's, not a's
		{"a_1", "walapply_a_15", 0, false},
		{"a", "walapply_a_", 0, false},
		{"a", "walapply_a_05", 0, false},         // not what TargetGID writes
		{"a", "walapply_a_4294967296", 0, false}, // beyond uint32
		{"a", "walapply_a_+5", 0, false},
		{"a", "walapply_a_5 ", 0, false},
		{"a", "pg_gid_16384_5", 0, false},
		{"", "walapply__5", 0, false},
	}
	for _, tt := range tests {
		xid, ok := ParseTargetGID(tt.applier, tt.gid)
		if xid != tt.xid || ok != tt.ok {
			t.Errorf("ParseTargetGID(%q, %q) = %d, %v; want %d, %v", tt.applier, tt.gid, xid, ok, tt.xid, tt.ok)
		}
	}
}

func TestParseMode(t *testing.T) {
	for _, m := range []Mode{GIDModeApplier, GIDModeSource} {
		got, err := ParseMode(m.String())
		if err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	if _, err := ParseMode("Applier"); err == nil {
		t.Error("ParseMode accepted \"Applier\"")
	}
	if var0 := Mode(0); var0 != GIDModeApplier {
		t.Error("the zero Mode is not GIDModeApplier")
	}
}

// nastyGIDs are GIDs whose literal must survive quoting exactly.
var nastyGIDs = []string{
	"",
	"plain",
	"'",
	"''",
	`it's`,
	`\`,
	`\\`,
	`\'`,
	`'\`,
	`E'x'`,
	`a\nb`, // backslash and n, not a newline
	"line\nbreak\ttab\r",
	`'; DROP TABLE victim; --`,
	`\'; DROP TABLE victim; --`,
	"$$dollar$$",
	"$1",
	"日本語のGID",
	"emoji 🐘",
	"\u00a0nbsp\u2028",
	`\000`,
	`\x41\u0041\101`,
	strings.Repeat("ü", 99) + "x", // 199 bytes
}

func TestQuoteGID(t *testing.T) {
	tests := []struct{ gid, want string }{
		{"", `E''`},
		{"plain", `E'plain'`},
		{"'", `E''''`},
		{`it's`, `E'it''s'`},
		{`\`, `E'\\'`},
		{`\'`, `E'\\'''`},
		{`a\nb`, `E'a\\nb'`},
		{"日本", "E'日本'"},
		{"new\nline", "E'new\nline'"},
		{"nul\x00byte", `E'nul\000byte'`},
	}
	for _, tt := range tests {
		if got := QuoteGID(tt.gid); got != tt.want {
			t.Errorf("QuoteGID(%q) = %s, want %s", tt.gid, got, tt.want)
		}
	}
}

// TestQuoteGIDServer prepares a transaction under each nasty GID and reads
// the GID back from pg_prepared_xacts, with standard_conforming_strings on
// and off, then finishes it by the same quoted GID.
func TestQuoteGIDServer(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		c := testenv.NewCluster(t, testenv.Options{Version: version})
		ctx := context.Background()
		conn, err := c.Connect(ctx, "postgres")
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "CREATE TABLE victim (v text)"); err != nil {
			t.Fatal(err)
		}
		applierGID, err := TargetGID(GIDModeApplier, `o'neil\`, 77, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, scs := range []string{"on", "off"} {
			if _, err := conn.Exec(ctx, "SET standard_conforming_strings = "+scs); err != nil {
				t.Fatal(err)
			}
			for i, gid := range append(nastyGIDs, applierGID) {
				tx, err := conn.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := tx.Exec(ctx, "INSERT INTO victim VALUES ($1)", gid); err != nil {
					t.Fatal(err)
				}
				if _, err := tx.Exec(ctx, "PREPARE TRANSACTION "+QuoteGID(gid)); err != nil {
					t.Fatalf("scs=%s: PREPARE TRANSACTION %s: %v", scs, QuoteGID(gid), err)
				}
				var got []string
				rows, err := conn.Query(ctx, "SELECT gid FROM pg_prepared_xacts")
				if err != nil {
					t.Fatal(err)
				}
				if got, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
					t.Fatal(err)
				}
				if len(got) != 1 || got[0] != gid {
					t.Fatalf("scs=%s: prepared %q, pg_prepared_xacts has %q", scs, gid, got)
				}
				finish := "COMMIT PREPARED "
				if i%2 == 1 {
					finish = "ROLLBACK PREPARED "
				}
				if _, err := conn.Exec(ctx, finish+QuoteGID(gid)); err != nil {
					t.Fatalf("scs=%s: %s%s: %v", scs, finish, QuoteGID(gid), err)
				}
			}
		}
		var committed int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM victim").Scan(&committed); err != nil {
			t.Fatal(err)
		}
		if want := 2 * ((len(nastyGIDs) + 2) / 2); committed != want {
			t.Fatalf("victim has %d rows, want %d (the committed half, both settings)", committed, want)
		}

		// What the server refuses, it refuses with an error, not by
		// preparing under another name.
		for _, gid := range []string{"nul\x00byte", strings.Repeat("g", GIDSize)} {
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO victim VALUES ('refused')"); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, "PREPARE TRANSACTION "+QuoteGID(gid)); err == nil {
				t.Fatalf("PREPARE TRANSACTION accepted %q", gid)
			}
			tx.Rollback(ctx)
			var n int
			if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_prepared_xacts").Scan(&n); err != nil || n != 0 {
				t.Fatalf("prepared transactions after a refused GID: %d, %v", n, err)
			}
		}
	})
}
