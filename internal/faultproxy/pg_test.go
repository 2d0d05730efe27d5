package faultproxy

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/walapply/walapply/testenv"
)

// proxiedURL is the cluster's connection URL with the proxy's port.
func proxiedURL(c *testenv.Cluster, p *Proxy, query string) string {
	u := c.ConnString("postgres")
	u = strings.Replace(u, fmt.Sprintf("127.0.0.1:%d", c.Port()), p.Addr(), 1)
	return strings.Replace(u, "sslmode=disable", query, 1)
}

// TestRealServer runs real PostgreSQL sessions through the proxy: a query
// session that negotiates (and is refused) TLS first, a DropAll that breaks
// it, and a logical replication stream in which one pgoutput Insert, and
// nothing else, is damaged.
func TestRealServer(t *testing.T) {
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c := testenv.NewCluster(t, testenv.Options{Version: version})
		p := newProxy(t, fmt.Sprintf("127.0.0.1:%d", c.Port()))

		// sslmode=prefer sends an SSLRequest, which a server without TLS
		// answers with an unframed 'N'.
		conn, err := pgx.Connect(ctx, proxiedURL(c, p, "sslmode=prefer"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var n int
		if err := conn.QueryRow(ctx, "SELECT 41 + 1").Scan(&n); err != nil || n != 42 {
			t.Fatalf("query through the proxy: %d, %v", n, err)
		}
		// sslmode=prefer may have made a first attempt on a connection of
		// its own, which the proxy sees close a moment later.
		for deadline := time.Now().Add(5 * time.Second); p.Conns() > 1 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		if d := p.DropAll(); d != 1 {
			t.Errorf("DropAll dropped %d connections, want 1", d)
		}
		if err := conn.QueryRow(ctx, "SELECT 1").Scan(&n); err == nil {
			t.Error("a query on a dropped connection succeeded")
		}

		if err := c.Exec(ctx, `CREATE TABLE t (id int PRIMARY KEY, v text)`); err != nil {
			t.Fatal(err)
		}
		if err := c.Exec(ctx, `CREATE PUBLICATION pub FOR TABLE t`); err != nil {
			t.Fatal(err)
		}
		if err := c.Exec(ctx, `SELECT pg_create_logical_replication_slot('s', 'pgoutput')`); err != nil {
			t.Fatal(err)
		}
		repl, err := pgconn.Connect(ctx, proxiedURL(c, p, "sslmode=prefer&replication=database"))
		if err != nil {
			t.Fatal(err)
		}
		defer repl.Close(ctx)
		err = pglogrepl.StartReplication(ctx, repl, "s", 0, pglogrepl.StartReplicationOptions{
			PluginArgs: []string{"proto_version '1'", "publication_names 'pub'"}})
		if err != nil {
			t.Fatal(err)
		}
		done, err := p.Corrupt(Corruption{Match: func(m []byte) bool { return m[0] == 'I' }, Action: FlipByte, Offset: 0})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Exec(ctx, `INSERT INTO t VALUES (1, 'damaged'), (2, 'intact')`); err != nil {
			t.Fatal(err)
		}
		// Begin, Relation, the damaged Insert, the intact one, Commit.
		var got []byte
		for len(got) < 5 {
			msg, err := repl.ReceiveMessage(ctx)
			if err != nil {
				t.Fatalf("receiving (types so far %q): %v", got, err)
			}
			cd, ok := msg.(*pgproto3.CopyData)
			if !ok || cd.Data[0] != pglogrepl.XLogDataByteID {
				continue
			}
			xld, err := pglogrepl.ParseXLogData(cd.Data[1:])
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, xld.WALData[0])
			if xld.WALData[0] == 'I'^0xff && !bytes.Contains(xld.WALData, []byte("damaged")) {
				t.Errorf("the damaged Insert is not the first one: %q", xld.WALData)
			}
		}
		if want := []byte{'B', 'R', 'I' ^ 0xff, 'I', 'C'}; !bytes.Equal(got, want) {
			t.Errorf("message types %q, want %q", got, want)
		}
		select {
		case d := <-done:
			if d.Original[0] != 'I' || !bytes.Contains(d.Original, []byte("damaged")) || d.Sent[0] != 'I'^0xff || d.WALStart == 0 {
				t.Errorf("damage %+v", d)
			}
		default:
			t.Error("no damage reported")
		}
	})
}
