package testenv

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// ConnString returns a URL connecting as superuser postgres to database db
// ("postgres" if empty) over TCP without TLS, e.g.
// postgres://postgres@127.0.0.1:25432/postgres?sslmode=disable.
func (c *Cluster) ConnString(db string) string {
	return c.connURL(db, "sslmode=disable")
}

// ReplicationConnString is ConnString with replication=database: a
// walsender connection for logical replication commands on database db.
func (c *Cluster) ReplicationConnString(db string) string {
	return c.connURL(db, "sslmode=disable&replication=database")
}

func (c *Cluster) connURL(db, query string) string {
	if db == "" {
		db = "postgres"
	}
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path:     "/" + db,
		RawPath:  "/" + url.PathEscape(db), // a '/' in the name stays in the name
		RawQuery: query,
	}
	return u.String()
}

// Connect opens a pgx connection as postgres to database db.
func (c *Cluster) Connect(ctx context.Context, db string) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, c.ConnString(db))
	if err != nil {
		return nil, fmt.Errorf("testenv: connecting to PostgreSQL %d on port %d: %w", c.version, c.port, err)
	}
	return conn, nil
}

// Exec runs one statement with arguments in database postgres on a
// connection of its own.
func (c *Cluster) Exec(ctx context.Context, sql string, args ...any) error {
	conn, err := c.Connect(ctx, "postgres")
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("testenv: executing %q: %w", sql, err)
	}
	return nil
}

// CreateDatabase creates database name (any characters; it is quoted).
func (c *Cluster) CreateDatabase(ctx context.Context, name string) error {
	return c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
}
