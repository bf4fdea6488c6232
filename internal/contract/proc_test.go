package contract

import (
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"
)

// BenchmarkDescendants is the /proc walk that every pause of a worker makes (twice per timed call
// pair, as each side is stopped while the other is timed).
// Both ways are timed on a small tree (this test's own process and a shell with two children),
// as a worker's is.
func BenchmarkDescendants(b *testing.B) {
	entries, _ := os.ReadDir("/proc")
	b.ReportMetric(float64(len(entries)), "proc-entries")
	root := smallTree(b)
	b.Run("tree", func(b *testing.B) {
		for b.Loop() {
			descendants(root)
		}
	})
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			scanDescendants(root)
		}
	})
}

// smallTree starts a shell in its own process group with two sleeping children and returns its pid.
func smallTree(tb testing.TB) int {
	tb.Helper()
	cmd := exec.Command("sh", "-c", "sleep 30 & sleep 30 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	for range 200 {
		if len(scanDescendants(cmd.Process.Pid)) == 2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cmd.Process.Pid
}

// The children lists and the full scan find the same processes, zombies left out by both.
func TestDescendantsTreeMatchesScan(t *testing.T) {
	root := smallTree(t)
	tree, ok := treeDescendants(root)
	if !ok {
		t.Skip("this kernel has no /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN): descendants scans /proc")
	}
	scan := scanDescendants(root)
	pids := func(ps []procStat) []int {
		var out []int
		for _, p := range ps {
			out = append(out, p.pid)
		}
		slices.Sort(out)
		return out
	}
	if len(scan) != 2 || !slices.Equal(pids(tree), pids(scan)) {
		t.Fatalf("tree walk found %v, scan found %v (want the shell's two children)", pids(tree), pids(scan))
	}
	if _, ok := treeDescendants(1 << 30); ok {
		t.Error("a pid that does not exist reads as a tree")
	}
}
