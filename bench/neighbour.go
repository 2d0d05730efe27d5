package bench

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// sessionOfItsOwn is how the harness starts walapply and the neighbours:
// in a new session (its own autogroup), killed when the harness dies.
//
// Each neighbour process, and walapply, runs in a session of its own
// (sessionOfItsOwn). With autogroup scheduling (Linux's
// kernel.sched_autogroup_enabled, on by default on many distributions)
// the kernel shares the CPU between sessions first and between the
// processes of a session second. Every PostgreSQL backend calls setsid(),
// so the built-in subscriber's apply worker is a session of its own; a
// neighbour and walapply that shared walbench's session split one
// session's share between them, so walapply got about a third of a core
// where the apply worker got a full share. A sidecar runs as a service or
// in a container of its own, never in its neighbour's session, so the
// harness gives each process its own. The difference it made, PostgreSQL
// 18 with the neighbour, walapply/builtin: pgbench 1.08 → 0.66, small
// 3.21 → 1.7, mixed 1.54 → 0.97 (BENCHMARKS.md, runs 15 and 17).
func sessionOfItsOwn() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
}

// ParseNeighbour parses walbench's --neighbour: "off" or "0" for none,
// "cores" for one per core, or a number of processes.
func ParseNeighbour(s string) (int, error) {
	switch strings.TrimSpace(s) {
	case "", "off":
		return 0, nil
	case "cores", "on":
		return runtime.NumCPU(), nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: --neighbour %q: off, cores, or a number of busy processes", ErrOptions, s)
	}
	return n, nil
}

// neighbours is a running neighbour load.
//
// The neighbour load (issue 17): a sidecar applier shares its node with
// other work, and figures taken on an idle machine do not say how it
// fares there. With Options.Neighbour > 0 every timed drain, of both
// appliers alike, runs beside that many CPU-bound processes: shell busy
// loops (`while :; do :; done`, no I/O, no memory), started just before
// the drain's clock and CPU counters start and killed as soon as the
// drain ends. Their CPU is in none of the drain's CPU figures. Each is
// bounded in time as well (the drain timeout and a minute), and dies with
// the harness (SIGKILL on the parent's death). The report records how
// many ran and the 1-minute load average at the end of every drain.
type neighbours struct {
	cmds   []*exec.Cmd
	cancel context.CancelFunc
}

// startNeighbours starts n busy processes that live at most limit.
func startNeighbours(ctx context.Context, n int, limit time.Duration) (*neighbours, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	nb := &neighbours{cancel: cancel}
	for range n {
		cmd := exec.CommandContext(ctx, "/bin/sh", "-c", "while :; do :; done")
		cmd.SysProcAttr = sessionOfItsOwn()
		if err := cmd.Start(); err != nil {
			nb.stop()
			return nil, fmt.Errorf("starting a neighbour process: %w", err)
		}
		nb.cmds = append(nb.cmds, cmd)
	}
	return nb, nil
}

// stop kills the processes and waits for them. A nil load is none.
func (nb *neighbours) stop() {
	if nb == nil {
		return
	}
	for _, c := range nb.cmds {
		_ = c.Process.Kill()
	}
	for _, c := range nb.cmds {
		_ = c.Wait()
	}
	nb.cancel()
}

// load1 is the 1-minute load average, 0 when unknown.
func load1() float64 {
	f := strings.Fields(loadAvg())
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
