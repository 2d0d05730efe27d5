package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/walapply/walapply/testenv"
)

// ErrProc reports a /proc file the harness could not make sense of.
var ErrProc = errors.New("bench: unexpected /proc contents")

// clockTicks is the unit of /proc/<pid>/stat times (USER_HZ, 100 on Linux).
const clockTicks = 100

// CPU is the CPU time spent during one drain.
//
// A drain's wall time says how long; the CPU the source
// cluster, the target cluster and walapply spent during it says where the
// work was done, and it is far steadier than wall time on a busy machine:
// the target's CPU per drain is what a change to the SQL walapply sends
// moves.
type CPU struct {
	Source, Target time.Duration // every process of the cluster
	Walapply       time.Duration // the walapply process (0 for builtin)
	// Segments is the number of TCP segments sent on the machine during
	// the drain (the Tcp OutSegs counter of /proc/net/snmp). On loopback
	// nearly all of them carry the replication stream, and their number
	// says whether the walsender's sends were coalesced: every segment
	// costs the sending side a pass through the loopback receive path,
	// while a send into a closed window only appends to a queued segment.
	Segments int64
	// Reads and Writes are walapply's read and write system calls
	// (syscr and syscw of /proc/<pid>/io; 0 for builtin): a copy that
	// sends a message per row shows it here (issue 17).
	Reads, Writes int64
}

// clusterCPU returns the CPU time of a cluster's postmaster, of its live
// children, and of the children it has reaped (counted in the postmaster's
// cutime and cstime), so that a backend that exited is not lost.
func clusterCPU(c *testenv.Cluster) (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join(c.DataDir(), "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("reading the postmaster's pid: %w", err)
	}
	pm, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		return 0, fmt.Errorf("reading the postmaster's pid: %w", err)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("listing processes: %w", err)
	}
	var ticks int64
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, ok := procStat(pid)
		if !ok || (pid != pm && st.ppid != pm) {
			continue
		}
		ticks += st.utime + st.stime
		if pid == pm {
			ticks += st.cutime + st.cstime
		}
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

type procStatFields struct {
	ppid                         int
	utime, stime, cutime, cstime int64
}

// procStat reads the parent and the CPU times of a process from
// /proc/<pid>/stat (proc(5)); ok is false if it is gone or unreadable.
func procStat(pid int) (procStatFields, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStatFields{}, false
	}
	// The command name, field 2, is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStatFields{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): ppid is field 4, utime..cstime 14..17.
	if len(f) < 15 {
		return procStatFields{}, false
	}
	num := func(k int) int64 { n, _ := strconv.ParseInt(f[k-3], 10, 64); return n }
	return procStatFields{ppid: int(num(4)), utime: num(14), stime: num(15), cutime: num(16), cstime: num(17)}, true
}

// cpuSnapshot is both clusters' CPU time and the TCP segments sent, at
// one moment.
type cpuSnapshot struct {
	source, target time.Duration
	segments       int64
}

func (r *runEnv) cpuNow() (cpuSnapshot, error) {
	s, err := clusterCPU(r.source)
	if err != nil {
		return cpuSnapshot{}, err
	}
	t, err := clusterCPU(r.target)
	if err != nil {
		return cpuSnapshot{}, err
	}
	b, err := os.ReadFile("/proc/net/snmp")
	if err != nil {
		return cpuSnapshot{}, fmt.Errorf("reading TCP counters: %w", err)
	}
	segs, err := tcpOutSegs(b)
	return cpuSnapshot{s, t, segs}, err
}

// tcpOutSegs returns the OutSegs counter from the text of /proc/net/snmp,
// whose "Tcp:" lines are a header of names and a line of values.
func tcpOutSegs(snmp []byte) (int64, error) {
	var names []string
	for _, line := range strings.Split(string(snmp), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "Tcp:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, n := range names {
			if n == "OutSegs" && i < len(f) {
				return strconv.ParseInt(f[i], 10, 64)
			}
		}
		break
	}
	return 0, fmt.Errorf("%w: no Tcp OutSegs in /proc/net/snmp", ErrProc)
}

// drained records the CPU spent since r.cpuStart, at the moment the marker
// arrived and before anything is stopped: a backend that exits is counted
// in its postmaster's cutime only once reaped, and one reaped in the middle
// of a scan of /proc would be lost. pid is the walapply process, 0 for
// builtin.
func (r *runEnv) drained(pid int) error {
	now, err := r.cpuNow()
	if err != nil {
		return err
	}
	r.cpu = CPU{Source: now.source - r.cpuStart.source, Target: now.target - r.cpuStart.target,
		Segments: now.segments - r.cpuStart.segments}
	if pid > 0 {
		if st, ok := procStat(pid); ok {
			r.cpu.Walapply = time.Duration(st.utime+st.stime) * time.Second / clockTicks
		}
		r.cpu.Reads, r.cpu.Writes = procSyscalls(pid)
	}
	return nil
}

// String prints the times in seconds: source, target, and walapply's own
// when it ran.
func (c CPU) String() string {
	s := fmt.Sprintf("source %.2f s, target %.2f s", c.Source.Seconds(), c.Target.Seconds())
	if c.Walapply > 0 {
		s += fmt.Sprintf(", walapply %.2f s", c.Walapply.Seconds())
	}
	s += fmt.Sprintf("; %d TCP segments", c.Segments)
	if c.Reads > 0 || c.Writes > 0 {
		s += fmt.Sprintf("; walapply %d read(2)s, %d write(2)s", c.Reads, c.Writes)
	}
	return s
}

// procSyscalls reads a process's read and write system call counts
// (syscr, syscw) from /proc/<pid>/io; 0 when it cannot.
func procSyscalls(pid int) (reads, writes int64) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, v, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch name {
		case "syscr":
			reads = n
		case "syscw":
			writes = n
		}
	}
	return reads, writes
}

// cpuMedians is the median of each CPU figure over runs.
func cpuMedians(cs []CPU) CPU {
	var src, tgt, own, segs, reads, writes []time.Duration
	for _, c := range cs {
		src, tgt, own = append(src, c.Source), append(tgt, c.Target), append(own, c.Walapply)
		segs = append(segs, time.Duration(c.Segments))
		reads, writes = append(reads, time.Duration(c.Reads)), append(writes, time.Duration(c.Writes))
	}
	return CPU{Source: statsOf(src).Median, Target: statsOf(tgt).Median, Walapply: statsOf(own).Median,
		Segments: int64(statsOf(segs).Median), Reads: int64(statsOf(reads).Median), Writes: int64(statsOf(writes).Median)}
}

// formatCPU prints median CPU seconds as source+target, with +walapply's
// own for walapply: "b 0.9+4.1 · w 0.8+2.0+0.9".
func formatCPU(b, w CPU, nb, nw int) string {
	return sideBySide(b, w, nb, nw, func(c CPU) string {
		out := fmt.Sprintf("%.1f+%.1f", c.Source.Seconds(), c.Target.Seconds())
		if c.Walapply > 0 {
			out += fmt.Sprintf("+%.1f", c.Walapply.Seconds())
		}
		return out
	})
}

// formatSegments prints the median TCP segments of a drain in thousands,
// builtin's and walapply's: "b 3k · w 8k".
func formatSegments(b, w CPU, nb, nw int) string {
	return sideBySide(b, w, nb, nw, func(c CPU) string { return fmt.Sprintf("%.0fk", float64(c.Segments)/1000) })
}

// sideBySide prints builtin's and walapply's figures as "b ... · w ...",
// "–" for an applier without successful runs (nb, nw).
func sideBySide(b, w CPU, nb, nw int, format func(CPU) string) string {
	part := func(c CPU, n int) string {
		if n == 0 {
			return "–"
		}
		return format(c)
	}
	return "b " + part(b, nb) + " · w " + part(w, nw)
}
