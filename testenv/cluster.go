package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Options configures a cluster.
type Options struct {
	// Version is the major version (15–18); 0 means the lowest version
	// selected by WALAPPLY_TEST_PG.
	Version int
	// Settings are extra postgresql.conf parameters, e.g.
	// "logical_decoding_work_mem": "64kB". They override testenv's
	// defaults (see the package documentation). Values are quoted for
	// the file; write them as in SET.
	Settings map[string]string
	// HBA lines go into pg_hba.conf before the default lines that trust
	// every user from 127.0.0.1 (the first matching line wins), e.g.
	// "host all alice 127.0.0.1/32 scram-sha-256".
	HBA []string
	// FreshSystemID runs initdb for this cluster instead of copying the
	// shared template, so that its system identifier differs from every
	// other cluster's (copies of one template share the template's). It
	// costs about a second.
	FreshSystemID bool
	// TLS, if not nil, turns on ssl with certificates from an authority
	// made for this cluster (see tls.go, Cluster.TLS, ClientCert and
	// TLSConnString). Authentication is still what HBA says.
	TLS *TLSOptions
	// SkipMissing makes NewCluster (and NewPair, through PairOptions) skip
	// the test, saying why, instead of failing it when the version's server
	// is not installed and cannot be fetched (ErrServerMissing) or does not
	// run on this platform (ErrUnsupportedVersion): for the CI of a program
	// that uses testenv where not every version is at hand. The environment
	// variable WALAPPLY_TESTENV_SKIP_MISSING=1 does the same for every test.
	// Start itself never skips.
	SkipMissing bool
}

// ErrNotRunning is returned when stopping a cluster whose server is not
// running; ErrRunning when starting one that is; ErrClosed after Close.
var (
	ErrNotRunning = errors.New("testenv: server is not running")
	ErrRunning    = errors.New("testenv: server is already running")
	ErrClosed     = errors.New("testenv: cluster is closed")
)

// errPortInUse reports that the server could not bind its port.
var errPortInUse = errors.New("testenv: port already in use")

// Cluster is a throwaway PostgreSQL cluster: a data directory in a temporary
// directory and, while running, a postmaster listening on 127.0.0.1.
//
// Its methods may be called from several goroutines; lifecycle operations
// (Start, Stop, StopImmediate, Restart, Close) are serialised.
type Cluster struct {
	version int
	binDir  string
	dir     string // everything of the cluster; Close removes it
	dataDir string
	logPath string
	user    *serverUser
	port    int // fixed once the first start succeeded

	opMu   sync.Mutex // serialises lifecycle operations
	closed bool       // under opMu

	proc atomic.Pointer[postmaster] // the running server, or nil
}

// postmaster is one run of the server process.
type postmaster struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has been waited for
}

// Start creates a cluster from the template for opts.Version, picks a free
// port and starts the server; it returns once the server accepts
// connections. Close it when done (NewCluster and NewPair do that for tests).
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if shortRun() {
		return nil, errShortStart // short.go
	}
	version := opts.Version
	if version == 0 {
		v, err := defaultVersion()
		if err != nil {
			return nil, err
		}
		version = v
	}
	binDir, err := BinDir(version)
	if err != nil {
		return nil, err
	}
	u, err := lookupServerUser()
	if err != nil {
		return nil, err
	}
	tmpl, err := ensureTemplate(version, binDir, u)
	if err != nil {
		return nil, err
	}
	dir, err := newClusterDir()
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		version: version,
		binDir:  binDir,
		dir:     dir,
		dataDir: filepath.Join(dir, "data"),
		logPath: filepath.Join(dir, "server.log"),
		user:    u,
	}
	register(c)
	if err := c.create(ctx, tmpl, opts); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// create copies the template, configures it and starts the server, choosing
// another port when the first one turns out to be taken.
func (c *Cluster) create(ctx context.Context, tmpl string, opts Options) error {
	if opts.FreshSystemID {
		if err := os.Mkdir(c.dataDir, 0o700); err != nil {
			return fmt.Errorf("testenv: %w", err)
		}
		if err := c.user.chown(c.dataDir); err != nil {
			return err
		}
		args := append([]string{"--pgdata=" + c.dataDir}, initdbArgs...)
		if out, err := runServerProgram(c.user, c.dataDir, filepath.Join(c.binDir, "initdb"), args...); err != nil {
			return fmt.Errorf("testenv: initdb: %w\n%s", err, out)
		}
	} else if err := copyTree(tmpl, c.dataDir); err != nil {
		return fmt.Errorf("testenv: copying the template: %w", err)
	}
	if opts.TLS != nil {
		settings, err := c.setupTLS(opts.TLS, opts.Settings)
		if err != nil {
			return err
		}
		opts.Settings = settings
	}
	if err := configure(c.dataDir, opts); err != nil {
		return err
	}
	c.opMu.Lock()
	defer c.opMu.Unlock()
	const attempts = 10
	for i := 1; ; i++ {
		port, err := reservePort()
		if err != nil {
			return err
		}
		c.port = port
		err = c.launch(ctx)
		if !errors.Is(err, errPortInUse) || i == attempts {
			return err
		}
		releasePort(port)
		c.port = 0
	}
}

// launch starts the postmaster and waits until it is ready. Caller holds opMu.
func (c *Cluster) launch(ctx context.Context) error {
	logf, err := os.OpenFile(c.logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("testenv: opening server log: %w", err)
	}
	defer logf.Close() // the child has its own descriptor
	if err := c.user.chown(c.logPath); err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	st, err := logf.Stat()
	if err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	cmd := exec.Command(filepath.Join(c.binDir, "postgres"), "-D", c.dataDir, "-p", strconv.Itoa(c.port))
	cmd.Dir = c.dataDir
	cmd.Env = serverEnv()
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group: a Ctrl-C in the terminal reaches the test process,
	// whose handler shuts the server down, not the server directly.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.user.credential(), Setpgid: true}
	// SIGQUIT on our death is an immediate shutdown: the postmaster takes
	// its backends with it.
	if err := startProcess(cmd, syscall.SIGQUIT); err != nil {
		return fmt.Errorf("testenv: starting PostgreSQL %d as %s (every directory on %s must be searchable by that user): %w", c.version, c.user.describe(), c.binDir, err)
	}
	pm := &postmaster{cmd: cmd, exited: make(chan struct{})}
	c.proc.Store(pm)
	go func() {
		_ = cmd.Wait()
		c.proc.CompareAndSwap(pm, nil)
		close(pm.exited)
	}()
	return c.waitReady(ctx, pm, st.Size())
}

// waitReady polls postmaster.pid until the server pm reports "ready"
// (line 8 of the file, written once it accepts connections, after any crash
// recovery). logOffset is where this run's log output begins.
func (c *Cluster) waitReady(ctx context.Context, pm *postmaster, logOffset int64) error {
	pidFile := filepath.Join(c.dataDir, "postmaster.pid")
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if data, err := os.ReadFile(pidFile); err == nil {
			lines := strings.Split(string(data), "\n")
			if len(lines) > 7 && lines[0] == strconv.Itoa(pm.cmd.Process.Pid) && strings.TrimSpace(lines[7]) == "ready" {
				return nil
			}
		}
		select {
		case <-pm.exited:
			out := c.logFrom(logOffset)
			if strings.Contains(out, "Address already in use") {
				return errPortInUse
			}
			return fmt.Errorf("testenv: PostgreSQL %d exited during startup (%v); log %s:\n%s", c.version, pm.cmd.ProcessState, c.logPath, out)
		case <-ctx.Done():
			pm.kill()
			return fmt.Errorf("testenv: waiting for PostgreSQL %d to start: %w; log %s:\n%s", c.version, ctx.Err(), c.logPath, c.logFrom(logOffset))
		case <-tick.C:
		}
	}
}

// kill shuts the server down immediately and waits for it, resorting to
// SIGKILL if the postmaster does not exit (its backends notice its death and
// exit on their own).
func (pm *postmaster) kill() {
	_ = pm.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-pm.exited:
		return
	case <-time.After(10 * time.Second):
	}
	_ = pm.cmd.Process.Kill()
	<-pm.exited
}

// signal sends sig to the running server and waits for it to exit.
func (c *Cluster) signal(ctx context.Context, sig syscall.Signal, what string) error {
	c.opMu.Lock()
	defer c.opMu.Unlock()
	if c.closed {
		return ErrClosed
	}
	pm := c.proc.Load()
	if pm == nil {
		return ErrNotRunning
	}
	if err := pm.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("testenv: %s: %w", what, err)
	}
	select {
	case <-pm.exited:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("testenv: %s of PostgreSQL %d on port %d: %w", what, c.version, c.port, ctx.Err())
	}
}

// Stop shuts the server down in "fast" mode (like `pg_ctl stop -m fast`):
// sessions are disconnected, a shutdown checkpoint is written.
func (c *Cluster) Stop(ctx context.Context) error {
	return c.signal(ctx, syscall.SIGINT, "fast shutdown")
}

// StopImmediate shuts the server down in "immediate" mode (like `pg_ctl stop
// -m immediate`): every process exits at once without a checkpoint, so the
// next start runs crash recovery. This is how tests simulate a server crash.
func (c *Cluster) StopImmediate(ctx context.Context) error {
	return c.signal(ctx, syscall.SIGQUIT, "immediate shutdown")
}

// Start starts a stopped server again, on the same port and data directory.
func (c *Cluster) Start(ctx context.Context) error {
	c.opMu.Lock()
	defer c.opMu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if c.proc.Load() != nil {
		return ErrRunning
	}
	err := c.launch(ctx)
	if errors.Is(err, errPortInUse) {
		return fmt.Errorf("testenv: restarting PostgreSQL %d: port %d is now taken by another program: %w", c.version, c.port, err)
	}
	return err
}

// Restart is Stop followed by Start.
func (c *Cluster) Restart(ctx context.Context) error {
	if err := c.Stop(ctx); err != nil {
		return err
	}
	return c.Start(ctx)
}

// Close shuts the server down immediately (its data is about to go) and
// removes the cluster's directory, log included. Closing twice is a no-op.
func (c *Cluster) Close() error {
	c.opMu.Lock()
	defer c.opMu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if pm := c.proc.Load(); pm != nil {
		pm.kill()
	}
	unregister(c)
	if err := os.RemoveAll(c.dir); err != nil {
		return fmt.Errorf("testenv: removing cluster directory: %w", err)
	}
	return nil
}

// Version returns the major version of the server.
func (c *Cluster) Version() int { return c.version }

// Port returns the TCP port the server listens on at 127.0.0.1.
func (c *Cluster) Port() int { return c.port }

// DataDir returns the cluster's data directory.
func (c *Cluster) DataDir() string { return c.dataDir }

// BinDir returns the directory of the server binaries the cluster runs.
func (c *Cluster) BinDir() string { return c.binDir }

// LogPath returns the path of the server log (stdout and stderr of every
// run of the server, appended).
func (c *Cluster) LogPath() string { return c.logPath }

// Log returns the whole server log.
func (c *Cluster) Log() (string, error) {
	data, err := os.ReadFile(c.logPath)
	if err != nil {
		return "", fmt.Errorf("testenv: reading server log: %w", err)
	}
	return string(data), nil
}

// logFrom returns the log from byte offset on, or a note why it cannot.
func (c *Cluster) logFrom(offset int64) string {
	data, err := os.ReadFile(c.logPath)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	if offset > int64(len(data)) {
		offset = 0
	}
	return string(data[offset:])
}

// logTail returns the last n lines of the log, or a note why it cannot.
func (c *Cluster) logTail(n int) string {
	text, err := c.Log()
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.SplitAfter(strings.TrimRight(text, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "")
}
