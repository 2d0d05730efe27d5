package apply

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
)

// leasesHeld holds the target backends through which sessions of this
// process hold a running-applier lock now: a lock held by one of them is
// another Run's of this process, not an earlier incarnation's.
var leasesHeld sync.Map // uint32 → struct{}

// leaseClass is the first key of every running-applier lock: "wala".
const leaseClass int32 = 0x77616c61

// RunningError says that the applier's running-applier lock on the target
// is held by another session: the applier runs (or is being dropped).
type RunningError struct {
	Name string
	// PID and Host name the walapply process holding the lock, since
	// Since; PID is 0 when walapply.running has no current row for it.
	PID   int
	Host  string
	Since time.Time
	// Backend is the target backend holding the lock (0 if it let go
	// meanwhile) and App its application_name.
	Backend int32
	App     string
	// Other is the applier that holds the lock when it is not Name: its
	// name has the same hashtext.
	Other string
}

func (e *RunningError) Error() string {
	holder := "pid unknown"
	if e.PID != 0 {
		holder = fmt.Sprintf("pid %d on host %s, since %s", e.PID, e.Host, e.Since.UTC().Format("2006-01-02 15:04:05 MST"))
	}
	if e.PID == 0 && e.Backend != 0 {
		holder += fmt.Sprintf(": target backend %d holds its lock, application_name %q", e.Backend, e.App)
	}
	if e.Other != "" {
		return fmt.Sprintf("applier %q cannot run: applier %q (%s) runs against this target, and the two names share a lock key (hashtext(name)); give one of them another --name",
			e.Name, e.Other, holder)
	}
	return fmt.Sprintf("applier %q is already running against this target (%s); stop it first", e.Name, holder)
}

// tryLease takes the running-applier lock of name on conn if it is free.
//
// The running-applier lock: one walapply process per applier name and
// target database. Two processes with the same --name would fight over the
// applier's replication origin (one session at a time can set it up); the
// second used to retry until the first stopped and then take over without
// a word. Instead every session, right after the walapply schema is
// migrated, takes a session-level advisory lock on its control connection
// and records the holder in walapply.running (migration 00005): the walapply
// pid, the host, the target backend and since when. A second process finds
// the lock taken and stops at once with a permanent error naming them, and
// `walapply drop` takes the same lock, so that it cannot drop an applier
// that runs, nor can one start during a drop.
//
// The key is pg_try_advisory_lock(leaseClass, hashtext(name)). Locks of the
// two-int4 form have a key space of their own (objsubid 2 in pg_locks),
// apart from the one-bigint form that migrations.LockID and most
// applications use. hashtext has 32 bits, so two names can share a key:
// then one of them is refused while the other runs, and the error says so
// and names the other applier. A collision refuses a start that could have
// run, never lets two processes of one name run at once. Advisory locks are
// per database: an applier of the same name in another database of the
// target's cluster does not take this lock, but it is refused anyway, since
// the origin it would use is the cluster's (identity.go).
//
// The lock is the truth; the row describes its holder. The row is deleted
// when the session ends (a clean stop, a start that failed, a reconnect);
// a kill -9 leaves it behind, but the target ends the killed process's
// sessions, and with them the lock, and the next start overwrites the row.
// A row counts as current only while its backend_pid holds the lock in
// pg_locks; otherwise the holder's pid is "unknown".
//
// Between two sessions of a run (the back-off after a transient error) the
// lock is free: a second process that starts then gets it, and the first
// one's next session is refused instead. Still one at a time.
//
// A reconnect takes the lock again on its new control connection. If the
// previous session's backend has not yet noticed that its connection is
// gone, it still holds the lock: that is this process's own lock, and the
// start is retried (errLeaseNotReleased) rather than refused. So is a start
// whose lock is held for a process of this host that is gone (kill -9, then
// a restart before the target has ended the killed process's sessions), or
// for this pid on this host but no session of this process (a container
// restarted under the same host name and pid): their backends are about to
// end. A lock held from another host is refused: whether that process still
// lives cannot be told from here.
func tryLease(ctx context.Context, conn *pgx.Conn, name string) (bool, error) {
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.pg_try_advisory_lock($1, pg_catalog.hashtext($2))", oneShot, leaseClass, name).Scan(&ok); err != nil {
		return false, fmt.Errorf("taking the running-applier lock of applier %q on the target: %w", name, err)
	}
	return ok, nil
}

// releaseLease lets go of the lock tryLease took on conn.
func releaseLease(ctx context.Context, conn *pgx.Conn, name string) error {
	if _, err := conn.Exec(ctx, "SELECT pg_catalog.pg_advisory_unlock($1, pg_catalog.hashtext($2))", oneShot, leaseClass, name); err != nil {
		return fmt.Errorf("releasing the running-applier lock of applier %q on the target: %w", name, err)
	}
	return nil
}

// leaseHolder describes who holds the lock of name, for the error of a
// start (or a drop) that did not get it.
func leaseHolder(ctx context.Context, conn *pgx.Conn, name string) (*RunningError, error) {
	e := &RunningError{Name: name}
	var hasTable bool
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.to_regclass('walapply.running') IS NOT NULL", oneShot).Scan(&hasTable); err != nil {
		return nil, fmt.Errorf("looking for walapply.running on the target: %w", err)
	}
	row := "NULL::text, NULL::int, NULL::text, NULL::timestamptz"
	join, order := "", ""
	if hasTable {
		// A row is current when its backend holds the lock; among the rows
		// of a backend (a reused pid may match a stale one), the name's own
		// first.
		row = "r.applier, r.pid, r.host, r.started_at"
		join = `LEFT JOIN walapply.running r ON r.backend_pid = l.pid AND pg_catalog.hashtext(r.applier) = pg_catalog.hashtext($2)`
		order = `ORDER BY r.applier = $2 DESC NULLS LAST, r.started_at DESC NULLS LAST`
	}
	var other, host *string
	var pid *int
	var since *time.Time
	err := conn.QueryRow(ctx, `SELECT l.pid, coalesce(a.application_name, ''), `+row+`
		FROM pg_catalog.pg_locks l
		LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
		`+join+`
		WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
			AND l.classid = $1::pg_catalog.int4::pg_catalog.oid AND l.objid = pg_catalog.hashtext($2)::pg_catalog.oid
			AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())
		`+order+` LIMIT 1`, oneShot, leaseClass, name).Scan(&e.Backend, &e.App, &other, &pid, &host, &since)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return e, nil // let go meanwhile
	case err != nil:
		return nil, fmt.Errorf("reading who holds the running-applier lock of applier %q on the target: %w", name, err)
	}
	if pid != nil {
		e.PID, e.Host, e.Since = *pid, *host, *since
		if *other != name {
			e.Other = *other
		}
	}
	return e, nil
}

// takeLease takes the running-applier lock of applier name on conn (a
// session's control connection) and records this process in
// walapply.running. backend is the target backend that held the lock for
// this Run's previous session (0 for none); it is set to conn's when the
// lock is taken.
func takeLease(ctx context.Context, conn *pgx.Conn, name string, backend *uint32) error {
	ok, err := tryLease(ctx, conn, name)
	if err != nil {
		return err
	}
	if !ok {
		holder, err := leaseHolder(ctx, conn, name)
		if err != nil {
			return err
		}
		if why := holderGone(holder, *backend); why != "" {
			return fmt.Errorf("%w (target backend %d; %s)", errLeaseNotReleased, holder.Backend, why)
		}
		return &PermanentError{Err: holder}
	}
	*backend = conn.PgConn().PID()
	leasesHeld.Store(*backend, struct{}{})
	_, err = conn.Exec(ctx, `INSERT INTO walapply.running (applier, pid, host, backend_pid) VALUES ($1, $2, $3, pg_catalog.pg_backend_pid())
		ON CONFLICT (applier) DO UPDATE SET pid = EXCLUDED.pid, host = EXCLUDED.host, backend_pid = EXCLUDED.backend_pid, started_at = now()`, oneShot,
		name, os.Getpid(), hostname())
	if err != nil {
		return fmt.Errorf("recording applier %q in walapply.running on the target: %w", name, err)
	}
	return nil
}

// dropLease deletes the walapply.running row of the session whose control
// connection is conn and lets go of its lock, when the session ends;
// backend is the target backend takeLease recorded. Closing the connection
// would release the lock too, but only once the server has handled it,
// after Close returns: a restart right after could find it still taken.
func dropLease(ctx context.Context, conn *pgx.Conn, name string, backend uint32, log zerolog.Logger) {
	if conn == nil || backend != conn.PgConn().PID() {
		return // this session did not take the lock
	}
	leasesHeld.Delete(backend)
	if conn.IsClosed() {
		return
	}
	_, err := conn.Exec(ctx, `DELETE FROM walapply.running WHERE applier = $1 AND backend_pid = pg_catalog.pg_backend_pid()`, oneShot, name)
	if err == nil {
		err = releaseLease(ctx, conn, name)
	}
	if err != nil {
		log.Debug().Err(err).Msg("removing this session from walapply.running; the next start overwrites its row")
	}
}

// holderGone says why the lock's holder is a process that is gone, or
// about to let go, and returns "" when it may well run: see the comment
// at the top. previous is the backend of this Run's previous session.
func holderGone(h *RunningError, previous uint32) string {
	switch {
	case h.Backend == 0:
		return "it let go meanwhile"
	case previous != 0 && uint32(h.Backend) == previous:
		return "this applier's previous session"
	case h.PID == 0 || h.Other != "" || h.Host != hostname():
		return ""
	case h.PID == os.Getpid():
		if _, ours := leasesHeld.Load(uint32(h.Backend)); ours {
			return "" // another Run of this process
		}
		return "an earlier process with this pid on this host"
	}
	p, err := os.FindProcess(h.PID)
	if err == nil {
		err = p.Signal(syscall.Signal(0))
	}
	if errors.Is(err, os.ErrProcessDone) || errors.Is(err, syscall.ESRCH) {
		return fmt.Sprintf("pid %d on this host has exited", h.PID)
	}
	return ""
}

// hostname names this machine in walapply.running.
func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "unknown"
	}
	return h
}
