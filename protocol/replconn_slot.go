package protocol

import (
	"context"
	"fmt"
	"strings"
)

// MaxSlotNameLen is the longest slot name PostgreSQL keeps (NAMEDATALEN-1).
const MaxSlotNameLen = 63

// ValidateSlotName checks a replication slot name the way PostgreSQL's
// ReplicationSlotValidateName does: 1 to 63 characters from [a-z0-9_]. Slot
// names are written into replication commands unquoted, so this check is
// also what keeps them from injecting anything.
func ValidateSlotName(name string) error {
	if name == "" {
		return fmt.Errorf("protocol: empty replication slot name")
	}
	if len(name) > MaxSlotNameLen {
		return fmt.Errorf("protocol: replication slot name %q is longer than %d characters", name, MaxSlotNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return fmt.Errorf("protocol: replication slot name %q may contain only lower case letters, digits and underscores", name)
		}
	}
	return nil
}

// SlotOptions are the options of CREATE_REPLICATION_SLOT.
type SlotOptions struct {
	// TwoPhase creates the slot with two-phase decoding (PostgreSQL 15+):
	// prepared transactions are decoded at PREPARE TRANSACTION. Once set it
	// stays set: such a slot sends two-phase messages to every client.
	TwoPhase bool
	// Snapshot is "export" (the server's default when empty), "use" or
	// "nothing". See the CREATE_REPLICATION_SLOT documentation.
	Snapshot string
	// Temporary slots vanish when the connection ends.
	Temporary bool
	// Failover creates a failover-enabled slot (PostgreSQL 17+): physical
	// standbys with sync_replication_slots = on keep a copy of it, which
	// a client can stream from once the standby is promoted.
	Failover bool
}

// SlotInfo is what CREATE_REPLICATION_SLOT returns.
type SlotInfo struct {
	Name string
	// ConsistentPoint is the first position streaming can start from.
	ConsistentPoint LSN
	// SnapshotName is the exported snapshot, "" unless Snapshot was "export".
	// It is valid until the next command on this connection.
	SnapshotName string
}

// CreateSlot creates a logical slot for pgoutput. On PostgreSQL 15 and later
// it uses the option-list syntax; older servers get the legacy keywords
// (which cannot ask for two-phase decoding).
func (c *ReplConn) CreateSlot(ctx context.Context, name string, o SlotOptions) (SlotInfo, error) {
	if err := ValidateSlotName(name); err != nil {
		return SlotInfo{}, err
	}
	if err := c.ready(); err != nil {
		return SlotInfo{}, err
	}
	sql, err := createSlotSQL(c.version, name, o)
	if err != nil {
		return SlotInfo{}, err
	}
	res, err := c.execOne(ctx, sql)
	if err != nil {
		return SlotInfo{}, fmt.Errorf("protocol: create replication slot %q: %w", name, err)
	}
	if len(res.Rows) != 1 || len(res.Rows[0]) < 3 {
		return SlotInfo{}, fmt.Errorf("protocol: create replication slot %q: unexpected result shape", name)
	}
	row := res.Rows[0]
	cp, err := ParseLSN(string(row[1]))
	if err != nil {
		return SlotInfo{}, fmt.Errorf("protocol: create replication slot %q: consistent_point: %w", name, err)
	}
	return SlotInfo{Name: string(row[0]), ConsistentPoint: cp, SnapshotName: string(row[2])}, nil
}

// createSlotSQL builds CREATE_REPLICATION_SLOT for a server version. name
// must be valid.
func createSlotSQL(version int, name string, o SlotOptions) (string, error) {
	switch o.Snapshot {
	case "", "export", "use", "nothing":
	default:
		return "", fmt.Errorf("protocol: snapshot action %q: want export, use or nothing", o.Snapshot)
	}
	var b strings.Builder
	b.WriteString("CREATE_REPLICATION_SLOT ")
	b.WriteString(name)
	if o.Temporary {
		b.WriteString(" TEMPORARY")
	}
	b.WriteString(" LOGICAL pgoutput")
	if version >= 150000 {
		var opts []string
		if o.TwoPhase {
			opts = append(opts, "TWO_PHASE true")
		}
		if o.Failover {
			if version < MinFailoverVersion {
				return "", failoverUnsupported(version)
			}
			opts = append(opts, "FAILOVER true")
		}
		if o.Snapshot != "" {
			opts = append(opts, "SNAPSHOT "+quoteLiteral(o.Snapshot))
		}
		if len(opts) > 0 {
			b.WriteString(" (" + strings.Join(opts, ", ") + ")")
		}
		return b.String(), nil
	}
	if o.Failover {
		return "", failoverUnsupported(version)
	}
	if o.TwoPhase {
		return "", &UnsupportedError{Option: "a two-phase slot", Need: "PostgreSQL 15 or later", Have: "source is " + versionString(version),
			Hint: "create the slot without two-phase decoding"}
	}
	switch o.Snapshot {
	case "export":
		b.WriteString(" EXPORT_SNAPSHOT")
	case "use":
		b.WriteString(" USE_SNAPSHOT")
	case "nothing":
		b.WriteString(" NOEXPORT_SNAPSHOT")
	}
	return b.String(), nil
}

// SlotStatus is a row of pg_replication_slots.
type SlotStatus struct {
	Name     string
	Plugin   string // "pgoutput" for a slot walapply can use
	SlotType string // "logical" or "physical"
	Database string // "" for a physical slot
	// TwoPhase: the slot decodes prepared transactions at PREPARE (always
	// false before PostgreSQL 14, which has no such column).
	TwoPhase  bool
	Temporary bool
	// Failover: the slot is synchronised to standbys (PostgreSQL 17+);
	// Synced: this server is a standby (or a promoted one) whose copy of
	// the slot was synchronised from the primary. Both false before 17.
	Failover, Synced bool
	Active           bool
	ActivePID        int // 0 when not active
	RestartLSN       LSN // oldest WAL the slot keeps
	ConfirmedFlush   LSN // where streaming resumes
}

// Slot reads a slot's row from pg_replication_slots with plain SQL, which a
// replication=database connection accepts on the simple query protocol.
// found is false if no such slot exists.
func (c *ReplConn) Slot(ctx context.Context, name string) (s SlotStatus, found bool, err error) {
	if err := ValidateSlotName(name); err != nil {
		return SlotStatus{}, false, err
	}
	if err := c.ready(); err != nil {
		return SlotStatus{}, false, err
	}
	twoPhase, failover := "two_phase", "failover, synced"
	if c.version < 140000 {
		twoPhase = "false"
	}
	if c.version < MinFailoverVersion {
		failover = "false, false"
	}
	sql := "SELECT slot_name, coalesce(plugin, ''), slot_type, coalesce(database::text, ''), " + twoPhase +
		", temporary, active, coalesce(active_pid, 0), coalesce(restart_lsn, '0/0'), coalesce(confirmed_flush_lsn, '0/0'), " + failover +
		" FROM pg_catalog.pg_replication_slots WHERE slot_name = " + quoteLiteral(name)
	res, err := c.execOne(ctx, sql)
	if err != nil {
		return SlotStatus{}, false, fmt.Errorf("protocol: read replication slot %q: %w", name, err)
	}
	if len(res.Rows) == 0 {
		return SlotStatus{}, false, nil
	}
	row := res.Rows[0]
	if len(row) != 12 {
		return SlotStatus{}, false, fmt.Errorf("protocol: read replication slot %q: unexpected result shape", name)
	}
	s = SlotStatus{
		Name: string(row[0]), Plugin: string(row[1]), SlotType: string(row[2]), Database: string(row[3]),
		TwoPhase: string(row[4]) == "t", Temporary: string(row[5]) == "t", Active: string(row[6]) == "t",
		Failover: string(row[10]) == "t", Synced: string(row[11]) == "t",
	}
	if _, err := fmt.Sscan(string(row[7]), &s.ActivePID); err != nil {
		return SlotStatus{}, false, fmt.Errorf("protocol: read replication slot %q: active_pid: %w", name, err)
	}
	if s.RestartLSN, err = ParseLSN(string(row[8])); err != nil {
		return SlotStatus{}, false, fmt.Errorf("protocol: read replication slot %q: restart_lsn: %w", name, err)
	}
	if s.ConfirmedFlush, err = ParseLSN(string(row[9])); err != nil {
		return SlotStatus{}, false, fmt.Errorf("protocol: read replication slot %q: confirmed_flush_lsn: %w", name, err)
	}
	return s, true, nil
}

// MinFailoverVersion is the first server version with failover slots.
const MinFailoverVersion = 170000

func failoverUnsupported(version int) error {
	return &UnsupportedError{Option: "a failover slot", Need: "PostgreSQL 17 or later", Have: "source is " + versionString(version),
		Hint: "run without --failover; before 17 a logical slot does not survive a failover to a standby"}
}

// EnableFailover turns failover on for an existing slot
// (ALTER_REPLICATION_SLOT, PostgreSQL 17+).
func (c *ReplConn) EnableFailover(ctx context.Context, name string) error {
	if err := ValidateSlotName(name); err != nil {
		return err
	}
	if err := c.ready(); err != nil {
		return err
	}
	if c.version < MinFailoverVersion {
		return failoverUnsupported(c.version)
	}
	if _, err := c.pg.Exec(ctx, "ALTER_REPLICATION_SLOT "+name+" (FAILOVER true)").ReadAll(); err != nil {
		return fmt.Errorf("protocol: enable failover on replication slot %q: %w", name, err)
	}
	return nil
}

// DropSlot drops a slot. With wait, an active slot is waited for instead of
// being an error.
func (c *ReplConn) DropSlot(ctx context.Context, name string, wait bool) error {
	if err := ValidateSlotName(name); err != nil {
		return err
	}
	if err := c.ready(); err != nil {
		return err
	}
	sql := "DROP_REPLICATION_SLOT " + name
	if wait {
		sql += " WAIT"
	}
	if _, err := c.pg.Exec(ctx, sql).ReadAll(); err != nil {
		return fmt.Errorf("protocol: drop replication slot %q: %w", name, err)
	}
	return nil
}

// quoteLiteral quotes s as an SQL string literal. Replication commands and
// SQL with standard_conforming_strings (the only setting since PostgreSQL
// 9.1's default, and what the replication grammar always uses) take no
// backslash escapes, so doubling single quotes is the whole job.
func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// quoteIdent quotes s as an SQL identifier.
func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}
