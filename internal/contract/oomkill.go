package contract

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Why a worker that died by SIGKILL died. Nothing in the harness sends it SIGKILL while it runs
// on its own (the driver's own kills are timeouts, reported as such), so the sender is the
// process itself, something it started, or the kernel's OOM killer. Only the last is worth
// naming, and only the kernel can say it: a process killed for memory prints nothing.
//
// The kernel's log names the process it killed ("Out of memory: Killed process 4242 (python3)",
// "oom-kill:...,task=python3,pid=4242,uid=0"); reading it needs CAP_SYSLOG or
// kernel.dmesg_restrict=0. Where it cannot be read, /proc/vmstat's oom_kill counter (readable
// by anyone) says whether the OOM killer killed anything on the host while the process lived:
// a likelihood, said as one.

// oomWatch is what a process's start knows, to judge its death by.
type oomWatch struct {
	start    time.Duration // CLOCK_MONOTONIC_RAW at the start, the kernel log's time base
	oomKills int64         // /proc/vmstat oom_kill then; -1 when unreadable
}

func watchOOM() oomWatch {
	return oomWatch{start: monotonicRaw(), oomKills: vmstatOOMKills()}
}

// monotonicRaw is the clock nearest the kernel log's timestamps (local_clock: not adjusted by
// NTP, not counting suspend).
func monotonicRaw() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC_RAW, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// vmstatOOMKills is the host's count of OOM kills since boot (Linux 4.13+), -1 if unknown.
func vmstatOOMKills() int64 {
	b, err := os.ReadFile("/proc/vmstat")
	if err != nil {
		return -1
	}
	return parseVMStatOOMKills(b)
}

func parseVMStatOOMKills(b []byte) int64 {
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("oom_kill ")); ok {
			if n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}

// killedForMemory says why a process of the given pids, started under w, that died by SIGKILL
// died, when the kernel shows an OOM kill: "" when nothing shows one.
func (w oomWatch) killedForMemory(pids []int) string {
	if kmsg, err := kernelLog(); err == nil {
		// The kernel log is readable: it names the process, or the kill was not the OOM killer's.
		if line := oomKillLine(kmsg, pids, w.start-5*time.Second); line != "" {
			return "killed for memory (the kernel's OOM killer: " + line + ")"
		}
		return ""
	}
	if w.oomKills >= 0 {
		if now := vmstatOOMKills(); now > w.oomKills {
			return fmt.Sprintf("most likely killed for memory: the kernel's OOM killer killed %d process(es) on this host while it ran (/proc/vmstat oom_kill; the kernel's log, which would name them, is not readable here)", now-w.oomKills)
		}
	}
	return ""
}

// kernelLog reads the kernel's ring buffer (syslog READ_ALL: what dmesg prints).
func kernelLog() ([]byte, error) {
	const readAll, sizeBuffer = 3, 10
	n, err := syscall.Klogctl(sizeBuffer, nil)
	if err != nil {
		return nil, err
	}
	if n <= 0 {
		n = 1 << 20
	}
	buf := make([]byte, n)
	m, err := syscall.Klogctl(readAll, buf)
	if err != nil {
		return nil, err
	}
	return buf[:m], nil
}

var (
	reKilledProcess = regexp.MustCompile(`Killed process (\d+) \(`)
	reOOMKillPID    = regexp.MustCompile(`oom-kill:.*[,:]pid=(\d+)[,\s]`)
	reLogTime       = regexp.MustCompile(`^(?:<\d+>)?\[\s*(\d+)\.(\d+)\]`)
)

// oomKillLine finds the OOM killer's line about one of pids in a kernel log, ignoring lines
// stamped before since (a pid reused from an earlier kill). Lines without a timestamp (printk
// times off) are taken as they come.
func oomKillLine(kmsg []byte, pids []int, since time.Duration) string {
	want := map[string]bool{}
	for _, p := range pids {
		if p > 0 {
			want[strconv.Itoa(p)] = true
		}
	}
	found := ""
	for _, raw := range strings.Split(string(kmsg), "\n") {
		line := strings.TrimSpace(raw)
		var pid string
		if m := reKilledProcess.FindStringSubmatch(line); m != nil {
			pid = m[1]
		} else if m := reOOMKillPID.FindStringSubmatch(line + ","); m != nil {
			pid = m[1]
		}
		if pid == "" || !want[pid] {
			continue
		}
		if m := reLogTime.FindStringSubmatch(line); m != nil {
			sec, _ := strconv.ParseInt(m[1], 10, 64)
			frac, _ := strconv.ParseFloat("0."+m[2], 64)
			if time.Duration(sec)*time.Second+time.Duration(frac*float64(time.Second)) < since {
				continue
			}
			line = strings.TrimSpace(line[len(m[0]):])
		}
		// The "Killed process" line says what it freed; the oom-kill line only what it chose.
		if found == "" || strings.Contains(line, "Killed process") {
			found = line
		}
	}
	if len(found) > 200 {
		found = found[:200] + "..."
	}
	return found
}
