package contract

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kbplatform/kbplatform/sdk"
)

func TestParseComputeApps(t *testing.T) {
	out := "4242, /usr/bin/python3, 518\n" +
		"77, python3 -c import torch, x = 1, [N/A]\n" +
		"\n"
	ps, err := parseComputeApps([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := []GPUProcess{{4242, "/usr/bin/python3", 518}, {77, "python3 -c import torch, x = 1", -1}}
	if fmt.Sprint(ps) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", ps, want)
	}
	if ps, err := parseComputeApps([]byte("No running processes found\n")); err != nil || len(ps) != 0 {
		t.Fatalf("no processes: got %v, %v", ps, err)
	}
	if _, err := parseComputeApps([]byte("Failed to initialize NVML: Driver/library version mismatch\n")); err == nil {
		t.Fatal("an error message read as a process list")
	}
}

// startProc starts a command that lives until the test ends, as a proc the judge can read.
func startProc(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	c := exec.Command(name, args...)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	return &proc{cmd: c}
}

// neighbourRun is an evaluation whose reference and candidate are live processes (sleep), with
// its GPU's process list given.
func neighbourRun(t *testing.T, list func(ref, cand int) ([]GPUProcess, error)) func() *Result {
	t.Helper()
	ref, cand := startProc(t, "sleep", "60"), startProc(t, "sleep", "60")
	e := &Evaluator{opt: Options{GPUProcesses: func(string) ([]GPUProcess, error) { return list(ref.pid(), cand.pid()) }}}
	r := &evalRun{e: e, res: &Result{}, ref: &refServer{p: ref}, cand: cand}
	return func() *Result {
		before, after := r.scanNeighbours("cuda:0"), r.scanNeighbours("cuda:0")
		r.judgeNeighbours("cuda:0", before, after)
		return r.res
	}
}

// workerScript writes what the check takes for another kbplatform's worker: a run.py beside a
// kbpworker package (sh runs it with body: its command line is what the check reads).
func workerScript(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "kbpworker"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "run.py")
	if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return script
}

func TestNeighboursFlagsAProgramOutsideKbplatform(t *testing.T) {
	worker := startProc(t, "sh", workerScript(t, "sleep 60 &\nwait\n"), "reference")
	// What that worker started (a compile worker, say): its child, the sleep.
	var helper int
	for deadline := time.Now().Add(5 * time.Second); helper == 0; time.Sleep(5 * time.Millisecond) {
		if kids := descendants(worker.pid()); len(kids) > 0 {
			helper = kids[0].pid
		} else if time.Now().After(deadline) {
			t.Fatal("the worker's child did not start")
		}
	}
	// A run.py without the package beside it is not a worker.
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "run.py"), []byte("sleep 60\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lookalike := startProc(t, "sh", filepath.Join(other, "run.py"))
	stranger := startProc(t, "sleep", "60")

	judge := neighbourRun(t, func(ref, cand int) ([]GPUProcess, error) {
		return []GPUProcess{{ref, "python3", 600}, {cand, "python3", 700}, {worker.pid(), "python3", 500}, {helper, "compile_worker", 300}}, nil
	})
	if res := judge(); len(res.Flags) != 0 || len(res.Warnings) != 0 {
		t.Fatalf("only kbplatform's processes on the GPU: flags %v, warnings %v", res.Flags, res.Warnings)
	}

	calls := 0
	judge = neighbourRun(t, func(ref, cand int) ([]GPUProcess, error) {
		calls++
		ps := []GPUProcess{{ref, "python3", 600}, {cand, "python3", 700}, {stranger.pid(), "train.py", 30000}}
		if calls == 2 { // the second look: one more, and the stranger again
			ps = append(ps, GPUProcess{lookalike.pid(), "sh", -1}, GPUProcess{999999999, "", -1})
		}
		return ps, nil
	})
	res := judge()
	reason := res.FlagReason(sdk.FlagGPUShared)
	if reason == "" {
		t.Fatalf("a stranger on the GPU: no %s flag (flags %v)", sdk.FlagGPUShared, res.Flags)
	}
	for _, want := range []string{fmt.Sprintf("pid %d (train.py, 30000 MiB)", stranger.pid()), fmt.Sprintf("pid %d (sh)", lookalike.pid()), "pid 999999999", "cuda:0"} {
		if !strings.Contains(reason, want) {
			t.Errorf("reason %q does not name %q", reason, want)
		}
	}
	if strings.Count(reason, fmt.Sprintf("pid %d ", stranger.pid())) != 1 {
		t.Errorf("a process seen by both looks is named twice: %q", reason)
	}
	if !sdk.MeasurementFlag(sdk.FlagGPUShared) {
		t.Error("gpu_shared remarks on the measurement, not on the kernel")
	}
}

// Another command's worker listed on the GPU that exits before the timing is judged (its
// validation ended while this evaluation profiled) is still known as kbplatform's: it was told
// apart when the list was read.
func TestNeighboursWorkerThatExitsBeforeTheJudging(t *testing.T) {
	c := exec.Command("sh", workerScript(t, "sleep 60\n"))
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	worker := c.Process.Pid
	ref, cand := startProc(t, "sleep", "60"), startProc(t, "sleep", "60")
	list := func(string) ([]GPUProcess, error) {
		return []GPUProcess{{ref.pid(), "python3", 600}, {cand.pid(), "python3", 700}, {worker, "python3", 500}}, nil
	}
	r := &evalRun{e: &Evaluator{opt: Options{GPUProcesses: list}}, res: &Result{}, ref: &refServer{p: ref}, cand: cand}
	before, after := r.scanNeighbours("cuda:0"), r.scanNeighbours("cuda:0")
	before.wait()
	after.wait()
	_ = c.Process.Kill()
	_ = c.Wait() // reaped: its /proc entry is gone
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", worker)); err == nil {
		t.Fatal("the worker is still there")
	}
	r.judgeNeighbours("cuda:0", before, after)
	if len(r.res.Flags) != 0 {
		t.Fatalf("a kbplatform worker that exited before the judging was taken for a stranger: %v", r.res.Flags)
	}
}

func TestNeighboursNoCheckWhenTheListIsNotThisHosts(t *testing.T) {
	// A container whose driver lists the host's process numbers: neither of the evaluation's own
	// processes is named, so none can be told apart. Nothing is flagged; the record says so.
	judge := neighbourRun(t, func(ref, cand int) ([]GPUProcess, error) {
		return []GPUProcess{{ref + 1000000, "python3", 600}, {cand + 1000000, "python3", 700}, {12, "train.py", 30000}}, nil
	})
	res := judge()
	if len(res.Flags) != 0 || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "another PID namespace") {
		t.Fatalf("flags %v, warnings %v", res.Flags, res.Warnings)
	}

	judge = neighbourRun(t, func(int, int) ([]GPUProcess, error) { return nil, errors.New("nvidia-smi: not found") })
	res = judge()
	if len(res.Flags) != 0 || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "nvidia-smi: not found") {
		t.Fatalf("flags %v, warnings %v", res.Flags, res.Warnings)
	}
}

func TestNeighboursOnlyOnCUDA(t *testing.T) {
	e := &Evaluator{opt: Options{GPUProcesses: func(string) ([]GPUProcess, error) { t.Fatal("listed the processes of a CPU device"); return nil, nil }}}
	r := &evalRun{e: e, res: &Result{}}
	if l := r.scanNeighbours("cpu"); l != nil {
		t.Fatal("a look at the CPU")
	}
	r.judgeNeighbours("cpu", nil, nil)
	if len(r.res.Warnings) != 0 {
		t.Fatal(r.res.Warnings)
	}
}
