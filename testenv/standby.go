package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// StandbyOptions configures a physical standby of a cluster (see
// Cluster.StartStandby).
type StandbyOptions struct {
	// Slot is the physical replication slot on the primary that the
	// standby streams from (primary_slot_name); it is created if missing.
	// Empty means "standby_<port of the primary>".
	Slot string
	// SyncSlots turns on the synchronisation of failover-enabled logical
	// slots to the standby (PostgreSQL 17+): sync_replication_slots = on
	// on the standby, and synchronized_standby_slots = Slot on the
	// primary, so that no logical walsender of the primary sends a change
	// the standby has not flushed. NoStandbyWait leaves the latter out:
	// the primary's logical walsenders then do not wait for the standby,
	// which may lag behind what a subscriber applied.
	SyncSlots, NoStandbyWait bool
	// Settings are extra postgresql.conf parameters of the standby.
	Settings map[string]string
}

// StartStandby makes a physical standby of c, the way pg_basebackup -R
// would: the npm builds of 16–18 have no pg_basebackup (and the system's
// PostgreSQL 15 client does not stream from newer servers), so the base
// backup is a cold copy of c's data directory, taken during a fast
// shutdown of c, which is started again right after. The copy leaves out
// c's replication slots (a standby synchronises its logical slots itself,
// and refuses one of the same name it did not synchronise). The standby
// streams from c with a physical slot and hot_standby_feedback, as slot
// synchronisation needs, and is returned once it accepts connections
// (read-only, in recovery). Close it when done (NewStandby does so for
// tests).
func (c *Cluster) StartStandby(ctx context.Context, opts StandbyOptions) (*Cluster, error) {
	if opts.SyncSlots && c.version < 17 {
		return nil, fmt.Errorf("%w: slot synchronisation needs PostgreSQL 17 or later, not %d", ErrUnsupportedVersion, c.version)
	}
	if opts.Slot == "" {
		opts.Slot = "standby_" + strconv.Itoa(c.port)
	}
	if err := c.Exec(ctx, `SELECT pg_catalog.pg_create_physical_replication_slot($1, true)
		WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_replication_slots WHERE slot_name = $1)`, opts.Slot); err != nil {
		return nil, err
	}
	if opts.SyncSlots && !opts.NoStandbyWait {
		if err := c.Exec(ctx, `ALTER SYSTEM SET synchronized_standby_slots = `+quoteConf(opts.Slot)); err != nil {
			return nil, err
		}
	}
	dir, err := newClusterDir()
	if err != nil {
		return nil, err
	}
	s := &Cluster{version: c.version, binDir: c.binDir, dir: dir, dataDir: filepath.Join(dir, "data"),
		logPath: filepath.Join(dir, "server.log"), user: c.user}
	register(s)
	if err := c.Stop(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	err = copyTreeSkipping(c.dataDir, s.dataDir, func(rel string) bool {
		return filepath.Dir(rel) == "pg_replslot" || rel == "postmaster.opts" || rel == "postgresql.auto.conf"
	})
	if startErr := c.Start(ctx); err == nil {
		err = startErr
	}
	if err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("testenv: copying the primary for a standby: %w", err)
	}
	settings := map[string]string{
		"primary_conninfo":     fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=postgres application_name=%s", c.port, opts.Slot),
		"primary_slot_name":    opts.Slot,
		"hot_standby_feedback": "on",
	}
	if opts.SyncSlots {
		settings["sync_replication_slots"] = "on"
	}
	for k, v := range opts.Settings {
		settings[k] = v
	}
	if err := s.finishStandby(ctx, settings); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// finishStandby writes the standby's settings and standby.signal and
// starts it on a port of its own.
func (s *Cluster) finishStandby(ctx context.Context, settings map[string]string) error {
	conf, err := renderConf(settings)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(s.dataDir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	if _, err := f.WriteString(conf); err != nil {
		f.Close()
		return fmt.Errorf("testenv: writing the standby's postgresql.conf: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	signal := filepath.Join(s.dataDir, "standby.signal")
	if err := os.WriteFile(signal, nil, 0o600); err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	if err := s.user.chown(signal); err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	s.opMu.Lock()
	defer s.opMu.Unlock()
	for i := 1; ; i++ {
		port, err := reservePort()
		if err != nil {
			return err
		}
		s.port = port
		err = s.launch(ctx)
		if !errors.Is(err, errPortInUse) || i == 10 {
			return err
		}
		releasePort(port)
		s.port = 0
	}
}

// Promote ends recovery on a standby (pg_promote) and waits until it
// accepts writes, on a new timeline.
func (c *Cluster) Promote(ctx context.Context) error {
	if err := c.Exec(ctx, `SELECT pg_catalog.pg_promote(true, 60)`); err != nil {
		return err
	}
	conn, err := c.Connect(ctx, "postgres")
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for {
		var recovery bool
		if err := conn.QueryRow(ctx, `SELECT pg_catalog.pg_is_in_recovery()`).Scan(&recovery); err != nil {
			return fmt.Errorf("testenv: promoting PostgreSQL %d on port %d: %w", c.version, c.port, err)
		}
		if !recovery {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testenv: promoting PostgreSQL %d on port %d: %w", c.version, c.port, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// NewStandby starts a standby of primary for the test (StartStandby) and
// closes it when the test ends, like NewCluster.
func NewStandby(tb testing.TB, primary *Cluster, opts StandbyOptions) *Cluster {
	tb.Helper()
	SkipShort(tb)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	s, err := primary.StartStandby(ctx, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { closeForTest(tb, s, "standby") })
	return s
}

// MultiHostConnString returns a URL listing every cluster's address, in
// order, with target_session_attrs=read-write: libpq and pgx connect to
// the first that accepts writes, the primary of a primary and its
// standbys, whichever it is after a promotion.
func MultiHostConnString(db string, clusters ...*Cluster) string {
	if db == "" {
		db = "postgres"
	}
	hosts := make([]string, len(clusters))
	for i, c := range clusters {
		hosts[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port))
	}
	u := url.URL{Scheme: "postgres", User: url.User("postgres"), Host: strings.Join(hosts, ","), Path: "/" + db,
		RawQuery: "sslmode=disable&target_session_attrs=read-write"}
	return u.String()
}
