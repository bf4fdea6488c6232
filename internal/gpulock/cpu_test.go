package gpulock

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// CPUs agrees with the kernel's own account of this process's CPUs, in the kernel's notation.
func TestCPUs(t *testing.T) {
	cpus, err := CPUs()
	if err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status:", err)
	}
	var want string
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			want = strings.TrimSpace(v)
		}
	}
	if got := CPUList(cpus); got != want {
		t.Fatalf("CPUs %v, written %q; /proc/self/status says %q", cpus, got, want)
	}
	for _, c := range []struct {
		cpus []int
		want string
	}{{[]int{0}, "0"}, {[]int{0, 1, 2, 3, 8}, "0-3,8"}, {[]int{1, 3, 4, 5, 7}, "1,3-5,7"}, {nil, ""}} {
		if got := CPUList(c.cpus); got != c.want {
			t.Errorf("CPUList(%v) = %q, want %q", c.cpus, got, c.want)
		}
	}
}

// holdCPUsEnv makes the test binary a process that holds the CPUs it names until it is killed.
const holdCPUsEnv = "KBP_GPULOCK_TEST_HOLD_CPUS"

func TestMain(m *testing.M) {
	if list := os.Getenv(holdCPUsEnv); list != "" {
		var cpus []int
		for _, f := range strings.Split(list, ",") {
			n, _ := strconv.Atoi(f)
			cpus = append(cpus, n)
		}
		h, err := LockCPUs(context.Background(), Eval, cpus, nil)
		if err != nil {
			os.Stdout.WriteString("error " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Stdout.WriteString("held\n")
		os.Stdin.Read(make([]byte, 1)) // until killed (or the test's end closes stdin)
		h.Release()                    // and the lock files stay open (not collected) until then
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// holdCPUs starts another process that holds cpus, and returns it once it holds them.
func holdCPUs(t *testing.T, cpus string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holdCPUsEnv+"="+cpus)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cmd.StdinPipe(); err != nil { // open until the process ends
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "held\n" {
		t.Fatalf("the holder of CPUs %s said %q", cpus, line)
	}
	return cmd
}

// A process that holds some CPUs keeps every other process off each of them, whatever set the
// other asks for (the same, or one that overlaps), and off none of the rest; the waiter is told
// which CPU and who holds it; once the holder dies (SIGKILL: it gives nothing back itself) the
// waiter gets them.
func TestLockCPUsAcrossProcesses(t *testing.T) {
	setup(t)
	holder := holdCPUs(t, "1,2")
	pid := strconv.Itoa(holder.Process.Pid)
	for _, c := range []struct {
		cpus []int
		busy string // the CPU the waiter is told of; "" for a set that does not meet the holder's
	}{{[]int{1, 2}, "CPU 1"}, {[]int{0, 1}, "CPU 1"}, {[]int{2, 3}, "CPU 2"}, {[]int{0, 3}, ""}} {
		ctx, cancel := context.WithTimeout(context.Background(), 4*poll)
		var told *Busy
		h, err := LockCPUs(ctx, Eval, c.cpus, func(b *Busy) { told = b })
		cancel()
		if c.busy == "" {
			if err != nil {
				t.Fatalf("CPUs %v, none of them held: %v", c.cpus, err)
			}
			h.Release()
			continue
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("CPUs %v while another process holds 1,2: %v", c.cpus, err)
		}
		if told == nil || told.What != c.busy || !strings.HasPrefix(told.Holder, "pid "+pid) || told.Device != "cpu "+CPUList(c.cpus) {
			t.Fatalf("CPUs %v: the waiter was told %+v, want %s held by pid %s", c.cpus, told, c.busy, pid)
		}
	}
	// A waiter that gave up released what it had taken: CPU 0 (taken before CPU 1 was found
	// held) is free again.
	if h, err := LockCPUs(context.Background(), Eval, []int{0}, nil); err != nil {
		t.Fatalf("CPU 0 after a waiter for 0,1 gave up: %v", err)
	} else {
		h.Release()
	}
	got := make(chan error, 1)
	go func() {
		h, err := LockCPUs(context.Background(), Eval, []int{0, 1, 2}, nil)
		h.Release()
		got <- err
	}()
	time.Sleep(4 * poll)
	if err := holder.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("CPUs 1,2 were not taken after their holder was killed")
	}
}

// Two holders of one CPU in one process (two lock handles, as two evaluators have) take turns:
// the second's hold begins only after the first's ends.
func TestLockCPUsTurns(t *testing.T) {
	setup(t)
	type span struct{ from, to time.Time }
	spans := make(chan span, 2)
	start := make(chan struct{})
	for range 2 {
		go func() {
			<-start
			h, err := LockCPUs(context.Background(), Eval, []int{0, 1}, nil)
			if err != nil {
				t.Error(err)
				spans <- span{}
				return
			}
			s := span{from: time.Now()}
			time.Sleep(6 * poll) // a timing
			s.to = time.Now()
			h.Release()
			spans <- s
		}()
	}
	close(start)
	a, b := <-spans, <-spans
	if a.from.Before(b.to) && b.from.Before(a.to) {
		t.Fatalf("two holders of CPUs 0,1 held them at once: %v-%v and %v-%v", a.from, a.to, b.from, b.to)
	}
}
