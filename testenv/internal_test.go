package testenv

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseVersions(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{in: "", want: []int{15, 18}},
		{in: "  ", want: []int{15, 18}},
		{in: "all", want: []int{15, 16, 17, 18}},
		{in: "ALL", want: []int{15, 16, 17, 18}},
		{in: "17", want: []int{17}},
		{in: "18,15", want: []int{15, 18}},
		{in: "16 17, 16", want: []int{16, 17}},
		{in: "pg15,PG16", want: []int{15, 16}},
		{in: "14", wantErr: true},
		{in: "15,x", wantErr: true},
		{in: ",", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseVersions(tt.in)
		if tt.wantErr {
			if err == nil {
				t.Errorf("parseVersions(%q) = %v, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("parseVersions(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestRenderConf(t *testing.T) {
	conf, err := renderConf(map[string]string{
		"work_mem":                  "4MB",
		"fsync":                     "on", // overrides the base setting: comes later
		"application_name":          `it's a \ test`,
		"walapply.custom_option":    "x",
		"logical_decoding_work_mem": "64kB",
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"wal_level = 'logical'\n",
		"unix_socket_directories = ''\n",
		"work_mem = '4MB'\n",
		`application_name = 'it''s a \\ test'` + "\n",
		"walapply.custom_option = 'x'\n",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("conf lacks %q:\n%s", want, conf)
		}
	}
	base := strings.Index(conf, "fsync = 'off'")
	override := strings.Index(conf, "fsync = 'on'")
	if base < 0 || override < base {
		t.Errorf("fsync override must follow the base setting:\n%s", conf)
	}
	// Extra settings come in name order, so the file does not depend on map order.
	if a, l := strings.Index(conf, "application_name"), strings.Index(conf, "logical_decoding_work_mem"); a > l {
		t.Errorf("extra settings not sorted:\n%s", conf)
	}

	for _, bad := range []map[string]string{
		{"work mem": "1"},
		{"x = 1\nfsync": "on"},
		{"": "1"},
		{"work_mem": "1\nfsync = on"},
	} {
		if _, err := renderConf(bad); err == nil {
			t.Errorf("renderConf(%q) accepted", bad)
		}
	}
}

func TestRenderHBA(t *testing.T) {
	hba, err := renderHBA([]string{"host all alice 127.0.0.1/32 reject"})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(hba), "\n")
	want := []string{
		"# Written by walapply testenv.",
		"host all alice 127.0.0.1/32 reject",
		"host all all 127.0.0.1/32 trust",
		"host replication all 127.0.0.1/32 trust",
	}
	if !slices.Equal(lines, want) {
		t.Errorf("renderHBA = %q, want %q", lines, want)
	}
	if _, err := renderHBA([]string{"host all all 0.0.0.0/0 trust\nlocal all all trust"}); err == nil {
		t.Error("renderHBA accepted a multi-line entry")
	}
}

// tarEntry describes one entry of a synthetic npm tarball.
type tarEntry struct {
	name, body, link string
	mode             int64
	typ              byte
}

func writeTgz(t *testing.T, entries []tarEntry) string {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		hdr := &tar.Header{Name: e.name, Mode: e.mode, Size: int64(len(e.body)), Typeflag: typ, Linkname: e.link}
		if typ != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "pkg.tgz")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExtractNative(t *testing.T) {
	tgz := writeTgz(t, []tarEntry{
		{name: "package/package.json", body: "{}", mode: 0o644},
		{name: "package/native/bin/postgres", body: "binary", mode: 0o700},
		{name: "package/native/lib/libpq.so.5.18", body: "lib", mode: 0o600},
		{name: "package/native/share/postgresql/x.sql", body: "sql", mode: 0o664},
		{name: "package/native/pg-symlinks.json", mode: 0o644, body: `[
			{"source":"native/lib/libpq.so.5.18","target":"native/lib/libpq.so.5"},
			{"source":"native/lib/libpq.so.5.18","target":"native/lib/libpq.so"}]`},
	})
	dest := filepath.Join(t.TempDir(), "native")
	if err := extractNative(tgz, dest); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dest, "package.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("file outside native/ was extracted (stat: %v)", err)
	}
	modes := map[string]os.FileMode{"bin/postgres": 0o755, "lib/libpq.so.5.18": 0o644, "share/postgresql/x.sql": 0o644}
	for name, want := range modes {
		st, err := os.Stat(filepath.Join(dest, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", name, st.Mode().Perm(), want)
		}
	}
	for _, link := range []string{"lib/libpq.so.5", "lib/libpq.so"} {
		text, err := os.Readlink(filepath.Join(dest, link))
		if err != nil {
			t.Fatal(err)
		}
		if text != "libpq.so.5.18" {
			t.Errorf("%s -> %q, want the relative libpq.so.5.18", link, text)
		}
		body, err := os.ReadFile(filepath.Join(dest, link))
		if err != nil || string(body) != "lib" {
			t.Errorf("reading through %s: %q, %v", link, body, err)
		}
	}
}

func TestExtractNativeRejectsEscapes(t *testing.T) {
	tests := map[string][]tarEntry{
		"symlink out":   {{name: "package/native/lib/evil", link: "../../../etc/passwd", typ: tar.TypeSymlink}},
		"absolute link": {{name: "package/native/lib/evil", link: "/etc/passwd", typ: tar.TypeSymlink}},
		"list leaves": {
			{name: "package/native/lib/a", body: "x", mode: 0o644},
			{name: "package/native/pg-symlinks.json", mode: 0o644, body: `[{"source":"native/lib/a","target":"native/../../evil"}]`},
		},
		"list source missing": {
			{name: "package/native/pg-symlinks.json", mode: 0o644, body: `[{"source":"native/lib/a","target":"native/lib/b"}]`},
		},
	}
	for name, entries := range tests {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			dest := filepath.Join(root, "out", "native")
			if err := extractNative(writeTgz(t, entries), dest); err == nil {
				t.Fatal("extractNative accepted it")
			}
			if _, err := os.Lstat(filepath.Join(root, "evil")); err == nil {
				t.Error("a file was written outside the destination")
			}
		})
	}
	// A name that leaves native/ once cleaned is no part of the
	// installation: skipped, never written.
	root := t.TempDir()
	dest := filepath.Join(root, "a", "b", "native")
	tgz := writeTgz(t, []tarEntry{{name: "package/native/../../../evil", body: "x", mode: 0o644}})
	if err := extractNative(tgz, dest); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dest); len(entries) != 0 {
		t.Errorf("extracted %v", entries)
	}
	for _, p := range []string{filepath.Join(root, "evil"), filepath.Join(root, "a", "evil")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}
}

func TestParseOwner(t *testing.T) {
	tests := []struct {
		name string
		want processID
		ok   bool
	}{
		{"1234-987654-567890123", processID{pid: 1234, start: 987654}, true},
		{"1234-0-1", processID{pid: 1234}, true},
		{"1234-987654", processID{}, false},
		{"x-1-2", processID{}, false},
		{"0-1-2", processID{}, false},
		{"12-y-2", processID{}, false},
	}
	for _, tt := range tests {
		got, ok := parseOwner(tt.name)
		if ok != tt.ok || got != tt.want {
			t.Errorf("parseOwner(%q) = %+v, %v; want %+v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

func TestProcessIDAlive(t *testing.T) {
	me := self()
	if !me.alive() {
		t.Fatalf("this process (%+v) is reported dead", me)
	}
	if me.start == 0 {
		t.Skip("no /proc start times on this system: the pid-reuse checks below need them")
	}
	if other := (processID{pid: me.pid, start: me.start + 1}); other.alive() {
		t.Error("a different start time for our pid is reported alive (pid reuse not detected)")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if dead := (processID{pid: cmd.Process.Pid, start: 1}); dead.alive() {
		t.Errorf("exited process %d is reported alive", cmd.Process.Pid)
	}
}
