package bench

import (
	"errors"
	"os"
	"testing"
	"time"
)

func TestProcStat(t *testing.T) {
	// Burn CPU until the process has at least one tick: on a loaded
	// machine 50 ms of wall time may not be one (the bound is only a guard).
	var st procStatFields
	var ok bool
	for deadline := time.Now().Add(time.Minute); ; {
		if st, ok = procStat(os.Getpid()); !ok || st.utime+st.stime > 0 || time.Now().After(deadline) {
			break
		}
		for spin := time.Now().Add(10 * time.Millisecond); time.Now().Before(spin); {
		}
	}
	if !ok {
		t.Fatal("cannot read /proc/self/stat")
	}
	if st.ppid != os.Getppid() {
		t.Errorf("ppid %d, want %d", st.ppid, os.Getppid())
	}
	if st.utime+st.stime <= 0 {
		t.Errorf("no CPU time read: %+v", st)
	}
	if _, ok := procStat(-1); ok {
		t.Error("a process that cannot exist was read")
	}
}

func TestFormatCPU(t *testing.T) {
	b := CPU{Source: 900 * time.Millisecond, Target: 4100 * time.Millisecond}
	w := CPU{Source: 800 * time.Millisecond, Target: 2 * time.Second, Walapply: 900 * time.Millisecond}
	if got, want := formatCPU(b, w, 3, 3), "b 0.9+4.1 · w 0.8+2.0+0.9"; got != want {
		t.Errorf("formatCPU = %q, want %q", got, want)
	}
	if got, want := formatCPU(b, w, 3, 0), "b 0.9+4.1 · w –"; got != want {
		t.Errorf("formatCPU without walapply runs = %q, want %q", got, want)
	}
	if got := cpuMedians([]CPU{b, w, w}); got != w {
		t.Errorf("cpuMedians = %+v, want %+v", got, w)
	}
}

func TestTCPOutSegs(t *testing.T) {
	snmp := "Ip: Forwarding DefaultTTL\nIp: 1 64\n" +
		"Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors\n" +
		"Tcp: 1 200 120000 -1 2201 1133 0 14 9 9912837 9911204 57 0 40 0\n" +
		"Udp: InDatagrams NoPorts\nUdp: 5 0\n"
	got, err := tcpOutSegs([]byte(snmp))
	if err != nil || got != 9911204 {
		t.Errorf("tcpOutSegs = %d, %v; want 9911204", got, err)
	}
	if _, err := tcpOutSegs([]byte("Tcp: InSegs\nTcp: 3\n")); !errors.Is(err, ErrProc) {
		t.Errorf("tcpOutSegs without OutSegs: %v, want ErrProc", err)
	}
	if b, err := os.ReadFile("/proc/net/snmp"); err == nil {
		if n, err := tcpOutSegs(b); err != nil || n <= 0 {
			t.Errorf("tcpOutSegs of this machine's /proc/net/snmp = %d, %v", n, err)
		}
	}
}
