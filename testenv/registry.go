package testenv

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// registry holds the open clusters of this process and the ports they use.
//
// The clusters of all test processes of one user live in one parent
// directory, each in a subdirectory named "<pid>-<start time>-<random>"
// after the process that owns it. A process that dies without cleaning up
// (SIGKILL, a test timeout's panic) leaves its directories behind; the next
// process to start a cluster finds their owner gone and removes them. The
// servers themselves die with their owner (see startProcess).
var registry struct {
	sync.Mutex
	clusters map[*Cluster]struct{}
	ports    map[int]bool
}

// setupOnce sweeps stale clusters and installs the signal handler, once per
// process, when the first cluster is created.
var setupOnce sync.Once

// EnvDir names the environment variable that chooses where cluster
// directories go (see clustersParent).
const EnvDir = "WALAPPLY_TESTENV_DIR"

// shmDir is a RAM-backed file system on most Linux systems. Creating a
// cluster copies a 40 MB template: there it takes a tenth of the time it
// takes on disk, and with fsync off nothing else is lost by keeping test
// data in memory.
const shmDir = "/dev/shm"

// shmMinFree is how much room /dev/shm must have to be used: containers
// often give it only 64 MB.
const shmMinFree = 2 << 30

// clustersParent returns the directory holding every cluster of this user:
// walapply-testenv-<uid> in $WALAPPLY_TESTENV_DIR if set, else in /dev/shm if
// it is a tmpfs with room, else in $TMPDIR.
func clustersParent() string {
	return filepath.Join(clustersBase(), parentName())
}

// parentName is the name of the per-user directory of clusters.
func parentName() string {
	return fmt.Sprintf("walapply-testenv-%d", os.Geteuid())
}

func clustersBase() string {
	if d := os.Getenv(EnvDir); d != "" {
		return d
	}
	const tmpfsMagic = 0x01021994
	var st syscall.Statfs_t
	if err := syscall.Statfs(shmDir, &st); err == nil && st.Type == tmpfsMagic &&
		uint64(st.Bavail)*uint64(st.Bsize) >= shmMinFree && syscall.Access(shmDir, 0x2|0x1) == nil {
		return shmDir
	}
	return os.TempDir()
}

// sweptParents lists every directory where a previous process may have
// left clusters, whatever clustersBase chose for it.
func sweptParents() []string {
	out := []string{filepath.Join(shmDir, parentName()), filepath.Join(os.TempDir(), parentName())}
	if d := os.Getenv(EnvDir); d != "" {
		out = append(out, filepath.Join(d, parentName()))
	}
	return out
}

// newClusterDir creates an empty directory for a new cluster, named after
// this process.
func newClusterDir() (string, error) {
	parent := clustersParent()
	if err := os.MkdirAll(filepath.Dir(parent), 0o755); err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("testenv: %w", err)
	}
	// The name is predictable: make sure it is our own directory and not
	// something another user planted.
	st, err := os.Lstat(parent)
	if err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !st.IsDir() || (ok && int(sys.Uid) != os.Geteuid()) {
		return "", fmt.Errorf("testenv: %s is not a directory owned by us; remove it", parent)
	}
	// The server user must be able to traverse it, whatever the umask.
	if err := os.Chmod(parent, 0o755); err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	setupOnce.Do(func() {
		for _, p := range sweptParents() {
			sweep(p)
		}
		installSignalHandler()
	})
	id := self()
	dir, err := os.MkdirTemp(parent, fmt.Sprintf("%d-%d-", id.pid, id.start))
	if err != nil {
		return "", fmt.Errorf("testenv: creating cluster directory: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	return dir, nil
}

// parseOwner extracts the owner from a cluster directory name.
func parseOwner(name string) (processID, bool) {
	parts := strings.SplitN(name, "-", 3)
	if len(parts) != 3 {
		return processID{}, false
	}
	pid, err1 := strconv.Atoi(parts[0])
	start, err2 := strconv.ParseUint(parts[1], 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 {
		return processID{}, false
	}
	return processID{pid: pid, start: start}, true
}

// sweep removes the clusters in parent whose owning process is gone,
// stopping any server still running in them.
func sweep(parent string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		owner, ok := parseOwner(e.Name())
		if !ok || !e.IsDir() || owner.alive() {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		stopStale(filepath.Join(dir, "data"))
		_ = os.RemoveAll(dir)
	}
}

// stopStale shuts down the server of dataDir if one still runs: the pid
// from postmaster.pid counts only if that process works in dataDir, so a
// reused pid is never signalled.
func stopStale(dataDir string) {
	data, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.SplitN(string(data), "\n", 2)[0])
	if err != nil || pid <= 0 {
		return
	}
	want, err := filepath.EvalSymlinks(dataDir)
	if err != nil {
		return
	}
	if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err != nil || cwd != want {
		return
	}
	start, _, err := processStartTime(pid)
	if err != nil {
		return
	}
	proc := processID{pid: pid, start: start}
	for _, sig := range []syscall.Signal{syscall.SIGQUIT, syscall.SIGKILL} {
		_ = syscall.Kill(pid, sig)
		deadline := time.Now().Add(10 * time.Second)
		for proc.alive() && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if !proc.alive() {
			return
		}
	}
}

// installSignalHandler makes SIGINT and SIGTERM shut down and remove every
// cluster of the process before it dies of the signal, as it would have
// without the handler. Signals the process started out ignoring stay
// ignored.
func installSignalHandler() {
	var sigs []os.Signal
	for _, s := range []os.Signal{syscall.SIGINT, syscall.SIGTERM} {
		if !signal.Ignored(s) {
			sigs = append(sigs, s)
		}
	}
	if len(sigs) == 0 {
		return
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	go func() {
		sig := <-ch
		closeAll()
		signal.Reset(sigs...)
		_ = syscall.Kill(os.Getpid(), sig.(syscall.Signal))
		time.Sleep(time.Second) // the signal's default action ends us
		os.Exit(2)
	}()
}

// closeAll stops and removes every open cluster, in parallel, without
// waiting for lifecycle operations in progress.
func closeAll() {
	registry.Lock()
	var all []*Cluster
	for c := range registry.clusters {
		all = append(all, c)
	}
	registry.Unlock()
	var wg sync.WaitGroup
	for _, c := range all {
		wg.Go(func() {
			if pm := c.proc.Load(); pm != nil {
				pm.kill()
			}
			_ = os.RemoveAll(c.dir)
		})
	}
	wg.Wait()
}

func register(c *Cluster) {
	registry.Lock()
	defer registry.Unlock()
	if registry.clusters == nil {
		registry.clusters = make(map[*Cluster]struct{})
	}
	registry.clusters[c] = struct{}{}
}

func unregister(c *Cluster) {
	registry.Lock()
	defer registry.Unlock()
	delete(registry.clusters, c)
	delete(registry.ports, c.port)
}

// Ports are drawn at random below Linux's default ephemeral range
// (32768–60999): the kernel never hands them out as the source port of an
// outgoing connection, so a stopped cluster's port stays free for its
// restart. Parallel test processes may still draw the same port; the loser
// notices when the server cannot bind and draws again.
const portMin, portMax = 20000, 32000

// reservePort returns a port that is free now and not used by another
// cluster of this process (running or stopped).
func reservePort() (int, error) {
	registry.Lock()
	defer registry.Unlock()
	if registry.ports == nil {
		registry.ports = make(map[int]bool)
	}
	for range 100 {
		port := portMin + rand.IntN(portMax-portMin)
		if registry.ports[port] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		l.Close()
		registry.ports[port] = true
		return port, nil
	}
	return 0, errors.New("testenv: found no free port on 127.0.0.1")
}

func releasePort(port int) {
	registry.Lock()
	defer registry.Unlock()
	delete(registry.ports, port)
}
