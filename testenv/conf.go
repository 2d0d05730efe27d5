package testenv

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// baseSettings are appended to every cluster's postgresql.conf, before
// Options.Settings (a later line wins, so Settings can override them).
var baseSettings = [][2]string{
	// Only TCP on loopback: no Unix socket, so no 107-byte socket path
	// limit and no clash between clusters.
	{"listen_addresses", "127.0.0.1"},
	{"unix_socket_directories", ""},
	// What logical replication needs, with room for many slots and
	// walsenders per test.
	{"wal_level", "logical"},
	{"max_replication_slots", "20"},
	{"max_wal_senders", "20"},
	{"max_prepared_transactions", "20"},
	// The tests simulate process crashes (immediate shutdown, kill -9),
	// which lose nothing the kernel already holds, not operating-system
	// crashes: skipping fsync makes commits and checkpoints fast and does
	// not weaken what those tests show.
	{"fsync", "off"},
	// Deterministic, readable logs.
	{"lc_messages", "C"},
	{"timezone", "UTC"},
	{"log_timezone", "UTC"},
	{"log_line_prefix", "%m [%p] %q%u@%d "},
	{"log_replication_commands", "on"},
}

// settingName is what a postgresql.conf parameter name may look like
// (custom options have a dot).
var settingName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// renderConf returns the lines testenv appends to postgresql.conf: the base
// settings, then extra in name order.
func renderConf(extra map[string]string) (string, error) {
	var b strings.Builder
	b.WriteString("\n# Added by walapply testenv.\n")
	for _, kv := range baseSettings {
		fmt.Fprintf(&b, "%s = %s\n", kv[0], quoteConf(kv[1]))
	}
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		v := extra[k]
		if !settingName.MatchString(k) {
			return "", fmt.Errorf("testenv: invalid setting name %q", k)
		}
		if strings.ContainsAny(v, "\x00\r\n") {
			return "", fmt.Errorf("testenv: setting %s: value must be a single line", k)
		}
		fmt.Fprintf(&b, "%s = %s\n", k, quoteConf(v))
	}
	return b.String(), nil
}

// quoteConf quotes a postgresql.conf value. Quoting is valid for every
// parameter type. Inside quotes the server reads a doubled quote as one
// quote and unescapes backslash sequences, so both are escaped.
func quoteConf(v string) string {
	v = strings.ReplaceAll(v, `\`, `\\`)
	return "'" + strings.ReplaceAll(v, "'", "''") + "'"
}

// renderHBA returns a pg_hba.conf: the caller's lines first (the first
// matching line wins), then trust for everyone from 127.0.0.1, for ordinary
// and replication connections. Nothing else is reachable: the server listens
// on loopback only and has no Unix socket.
func renderHBA(extra []string) (string, error) {
	var b strings.Builder
	b.WriteString("# Written by walapply testenv.\n")
	for _, l := range extra {
		if strings.ContainsAny(l, "\x00\r\n") {
			return "", fmt.Errorf("testenv: HBA entry %q must be a single line", l)
		}
		b.WriteString(l + "\n")
	}
	b.WriteString("host all all 127.0.0.1/32 trust\n")
	b.WriteString("host replication all 127.0.0.1/32 trust\n")
	return b.String(), nil
}

// configure writes the cluster's settings into a fresh copy of the template.
func configure(dataDir string, opts Options) error {
	conf, err := renderConf(opts.Settings)
	if err != nil {
		return err
	}
	hba, err := renderHBA(opts.HBA)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dataDir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	if _, err := f.WriteString(conf); err != nil {
		f.Close()
		return fmt.Errorf("testenv: writing postgresql.conf: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("testenv: writing postgresql.conf: %w", err)
	}
	// Truncating keeps the file's owner and mode from the template.
	if err := os.WriteFile(filepath.Join(dataDir, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		return fmt.Errorf("testenv: writing pg_hba.conf: %w", err)
	}
	return nil
}
