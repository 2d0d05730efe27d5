package protocol

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/walapply/walapply/internal/secret"
)

// ReplConn is a logical replication connection to a source: a walsender
// started with replication=database, which takes replication commands
// (IDENTIFY_SYSTEM, CREATE_REPLICATION_SLOT, START_REPLICATION, ...) and
// plain SQL over the simple query protocol.
//
// A ReplConn carries at most one replication stream. Once StartReplication
// succeeds the connection is in copy-both mode and only the stream and Close
// may be used; when the stream ends (server error, CopyDone, broken socket)
// the connection is spent: reconnect to stream again. A ReplConn is not safe
// for concurrent use, except as ReplStream documents.
type ReplConn struct {
	pg      *pgconn.PgConn
	version int // server_version_num
	stream  *ReplStream
	// paced is the socket under pg, paced once streaming starts
	// (coalescingConn); nil when dialed otherwise.
	paced *coalescingConn
	// spent is set once the connection can take no more commands; it says why.
	spent error
}

// ConnectOption is an option of ConnectReplication.
type ConnectOption func(*connectOptions)

type connectOptions struct{ applicationName string }

// ApplicationName is the application_name the walsender shows in
// pg_stat_replication (and pg_stat_activity) when the connection string
// sets none; walapply's applier uses "walapply <name> stream".
func ApplicationName(name string) ConnectOption {
	return func(o *connectOptions) {
		if name != "" {
			o.applicationName = name
		}
	}
}

// ErrConnSpent is returned by commands on a connection that is streaming or
// whose stream has ended.
var ErrConnSpent = errors.New("protocol: the replication connection is streaming or its stream has ended; open a new connection")

// ConnectReplication opens a replication connection. connString is an
// ordinary PostgreSQL connection string (URL or key=value, as libpq takes);
// replication=database is added here, so the same string serves the SQL
// connections of the caller. TLS and all other settings pass through as given.
// application_name defaults to "walapply" (or to ApplicationName's) so the
// walsender is recognisable in pg_stat_replication; one set in connString
// wins, since synchronous_standby_names on the source may name it.
//
// Errors never contain a piece of a password (package secret masks them):
// a connection string that does not parse is reported with pgconn's reason.
func ConnectReplication(ctx context.Context, connString string, opts ...ConnectOption) (*ReplConn, error) {
	o := connectOptions{applicationName: "walapply"}
	for _, opt := range opts {
		opt(&o)
	}
	cfg, err := pgconn.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("protocol: parse the source connection string: %w", secret.Error(err, connString))
	}
	// A replication=true (physical) or missing setting would start the wrong
	// kind of walsender: logical decoding needs a database connection.
	cfg.RuntimeParams["replication"] = "database"
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = o.applicationName
	}
	// A cancel request to a walsender in copy-both mode would end the stream;
	// interrupt blocked reads with a socket deadline instead, which pgconn
	// recovers from (see ReplStream.Receive).
	cfg.BuildContextWatcherHandler = func(pg *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: pg.Conn()}
	}
	// The connection dialed last is the one pgconn keeps (a multi-host
	// string dials one host after another).
	var paced *coalescingConn
	cfg.DialFunc = coalescing(cfg.DialFunc, coalescePause, func(c *coalescingConn) { paced = c })
	cfg.BuildFrontend = func(r io.Reader, w io.Writer) *pgproto3.Frontend {
		return pgproto3.NewFrontend(bufio.NewReaderSize(r, streamReadBuffer), w)
	}
	pg, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("protocol: connect to the source for replication: %w", secret.Error(err, connString))
	}
	v, err := parseServerVersion(pg.ParameterStatus("server_version"))
	if err != nil {
		pg.Close(ctx)
		return nil, fmt.Errorf("protocol: connect to the source for replication: %w", err)
	}
	if v < 100000 {
		pg.Close(ctx)
		return nil, fmt.Errorf("protocol: logical replication with pgoutput needs PostgreSQL 10 or later (source is %s)", versionString(v))
	}
	return &ReplConn{pg: pg, version: v, paced: paced}, nil
}

// PgConn returns the underlying connection, for callers that need a
// replication command this type does not wrap. Do not use it while streaming.
func (c *ReplConn) PgConn() *pgconn.PgConn { return c.pg }

// ServerVersion returns the source's server_version_num, e.g. 180004.
func (c *ReplConn) ServerVersion() int { return c.version }

// Close ends the connection (and a stream on it). The walsender exits on
// Terminate also in copy-both mode.
func (c *ReplConn) Close(ctx context.Context) error {
	if c.stream != nil {
		c.stream.release()
	}
	if c.spent == nil {
		c.spent = ErrConnSpent
	}
	if err := c.pg.Close(ctx); err != nil {
		return fmt.Errorf("protocol: close the replication connection: %w", err)
	}
	return nil
}

// ready reports whether the connection can take a command.
func (c *ReplConn) ready() error {
	if c.spent != nil {
		return c.spent
	}
	if c.stream != nil {
		return ErrConnSpent
	}
	return nil
}

// SystemInfo is the result of IDENTIFY_SYSTEM.
type SystemInfo struct {
	SystemID string // the cluster's system identifier
	Timeline int32
	XLogPos  LSN    // current WAL flush position
	DBName   string // the database the connection is bound to
}

// IdentifySystem runs IDENTIFY_SYSTEM.
func (c *ReplConn) IdentifySystem(ctx context.Context) (SystemInfo, error) {
	if err := c.ready(); err != nil {
		return SystemInfo{}, err
	}
	r, err := pglogrepl.IdentifySystem(ctx, c.pg)
	if err != nil {
		return SystemInfo{}, fmt.Errorf("protocol: IDENTIFY_SYSTEM: %w", err)
	}
	return SystemInfo{SystemID: r.SystemID, Timeline: r.Timeline, XLogPos: LSN(r.XLogPos), DBName: r.DBName}, nil
}

// parseServerVersion turns the server_version parameter ("15.18 (Debian
// 15.18-0+deb12u1)", "18.4", "19devel", "9.6.24") into server_version_num.
// server_version_num itself is not reported at startup; reading it would cost
// a round trip.
func parseServerVersion(s string) (int, error) {
	f := strings.FieldsFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	if len(f) == 0 {
		return 0, fmt.Errorf("protocol: unrecognised server_version %q", s)
	}
	major, err := strconv.Atoi(f[0])
	if err != nil || major <= 0 {
		return 0, fmt.Errorf("protocol: unrecognised server_version %q", s)
	}
	minor := 0
	dot := len(f[0]) < len(s) && s[len(f[0])] == '.'
	if len(f) > 1 && dot {
		minor, _ = strconv.Atoi(f[1])
	}
	if major < 10 { // 9.6.24 is 90624
		patch := 0
		if len(f) > 2 {
			patch, _ = strconv.Atoi(f[2])
		}
		return major*10000 + minor*100 + patch, nil
	}
	return major*10000 + minor, nil
}

// versionString formats server_version_num as people write it: 150018 is
// "15.18", 90624 is "9.6.24".
func versionString(v int) string {
	if v < 100000 {
		return fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100)
	}
	return fmt.Sprintf("%d.%d", v/10000, v%10000)
}

// execOne runs one simple-protocol command and returns its single result.
func (c *ReplConn) execOne(ctx context.Context, sql string) (*pgconn.Result, error) {
	results, err := c.pg.Exec(ctx, sql).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(results) != 1 {
		return nil, fmt.Errorf("expected 1 result, got %d", len(results))
	}
	return results[0], nil
}

// drainToReady reads up to ReadyForQuery after a command failed half way
// (pglogrepl.StartReplication returns at the ErrorResponse), so that the
// connection can take the next command. If that fails the connection is spent.
func (c *ReplConn) drainToReady(ctx context.Context) {
	for {
		msg, err := c.pg.ReceiveMessage(ctx)
		if err != nil {
			c.spent = fmt.Errorf("protocol: the replication connection is unusable after a failed command: %w", err)
			return
		}
		if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
			return
		}
	}
}
