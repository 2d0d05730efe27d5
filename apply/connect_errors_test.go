package apply_test

import (
	"strings"
	"testing"
	"time"

	"github.com/walapply/walapply/testenv"
)

// TestConnectFailuresExplained: a source refusing TLS under sslmode=prefer
// before an authentication failure, a source without free WAL senders or
// replication slots, and a host that does not resolve each stop with an
// error that leads with the real cause and says what to change.
func TestConnectFailuresExplained(t *testing.T) {
	t.Parallel()
	testenv.ForEachVersion(t, func(t *testing.T, version int) {
		h := secHarness(t, testenv.Options{Version: version, HBA: pwHBA}, testenv.Options{Version: version})
		h.both(`CREATE TABLE t (id int PRIMARY KEY)`)
		h.source(`CREATE PUBLICATION pub FOR TABLE t`, "CREATE ROLE walpw LOGIN REPLICATION SUPERUSER PASSWORD 'right'")

		t.Run("TLS refused, then a wrong password", func(t *testing.T) {
			cfg := h.config("s", "pub")
			cfg.Source = secSetParam(secUserURL(h.pair.Source, "walpw", "wrong"), "sslmode", "prefer") // the server has ssl = off
			err := secRun(t, cfg)
			expectPermanent(t, err, "connecting to the source (check): failed to connect to `user=walpw database=postgres`: 127.0.0.1:",
				`password authentication failed for user "walpw"`, "check the user and password")
			msg := err.Error()
			if tls := strings.Index(msg, "server refused TLS"); tls >= 0 && tls < strings.Index(msg, "password authentication failed") {
				t.Errorf("the TLS refusal of the first attempt comes before the cause:\n%s", msg)
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("the error spans lines:\n%s", msg)
			}
		})

		t.Run("no WAL sender", func(t *testing.T) {
			src := testenv.NewCluster(t, testenv.Options{Version: version, Settings: map[string]string{"max_wal_senders": "0"}})
			cfg := h.config("s", "pub")
			cfg.Source, cfg.ConnectTimeout = src.ConnString("postgres"), time.Second
			expectPermanent(t, secRun(t, cfg), "max_wal_senders", "raise max_wal_senders on the source (a restart is needed")
		})

		t.Run("no replication slot", func(t *testing.T) {
			src := testenv.NewCluster(t, testenv.Options{Version: version, Settings: map[string]string{"max_replication_slots": "0"}})
			h.exec(src, `CREATE TABLE t (id int PRIMARY KEY)`, `CREATE PUBLICATION pub FOR TABLE t`)
			cfg := h.config("s", "pub")
			cfg.Source = src.ConnString("postgres")
			expectPermanent(t, secRun(t, cfg), "raise max_replication_slots on the source")
		})

		t.Run("no such host", func(t *testing.T) {
			cfg := h.config("s", "pub")
			cfg.Target, cfg.ConnectTimeout = "postgres://postgres@walapply-no-such-host.invalid:5432/postgres?sslmode=disable&connect_timeout=2", time.Second
			expectPermanent(t, secRun(t, cfg), "walapply-no-such-host.invalid", "the host name does not resolve")
		})
	})
}
