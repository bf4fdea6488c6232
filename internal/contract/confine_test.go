package contract

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kbplatform/kbplatform/internal/contract/worker"
	"github.com/kbplatform/kbplatform/internal/sandbox"
)

// The poisoning sequence that once made every later wrong kernel pass: a kernel writes an
// always-true comparison into the extracted worker, then a kernel that returns zeros is judged.
// The write is denied, and the zeros fail.
func TestKernelCannotPoisonTheWorker(t *testing.T) {
	e := newEvaluator(t, nil)
	task := loadTask(t, "scale_relu")
	first := e.Evaluate(context.Background(), task, loadKernel(t, "poison_worker"), "cpu", nil)
	if first.Verdict != Pass {
		t.Fatalf("the poisoning kernel computes honestly: got %s %s: %s\n%s", first.Verdict, first.ErrorClass, first.Message, first.Log)
	}
	if err := worker.Verify(filepath.Dir(e.script)); err != nil {
		t.Fatalf("the kernel changed the worker: %v", err)
	}
	zeros := e.Evaluate(context.Background(), task, loadKernel(t, "zeros"), "cpu", nil)
	if zeros.Verdict != Fail || zeros.ErrorClass != ClassMismatch {
		t.Fatalf("zeros after the poisoning kernel: got %s %s, want fail %s", zeros.Verdict, zeros.ErrorClass, ClassMismatch)
	}
	if sb := first.Sandbox; sb == nil || sb.Env != "allowlist" {
		t.Errorf("the record does not say what confined the kernel: %+v", sb)
	}
}

// A worker changed by anything outside the sandbox (the user, another program) is found before the
// next process starts from it and written afresh: a marker file once was all that was checked.
func TestChangedWorkerIsWrittenAgain(t *testing.T) {
	cache := t.TempDir()
	e, err := New(Options{Python: testPython(t), WorkDir: t.TempDir(), CacheDir: cache, Config: newEvaluator(t, nil).Config()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	compare := filepath.Join(filepath.Dir(e.script), "kbpworker", "compare.py")
	if err := os.Chmod(compare, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(compare, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString("\n\ndef compare_tensor(*a, **k):\n    return None\n")
	f.Close()
	var said []string
	e.opt.Progress = func(m string) { said = append(said, m) }
	res := e.Evaluate(context.Background(), loadTask(t, "scale_relu"), loadKernel(t, "zeros"), "cpu", nil)
	if res.Verdict != Fail || res.ErrorClass != ClassMismatch {
		t.Fatalf("zeros against a rewritten worker: got %s %s, want fail %s", res.Verdict, res.ErrorClass, ClassMismatch)
	}
	if err := worker.Verify(filepath.Dir(e.script)); err != nil {
		t.Errorf("the worker was not written again: %v", err)
	}
	if !strings.Contains(strings.Join(said, "\n"), "changed") {
		t.Errorf("the run did not say the worker had been changed: %q", said)
	}
}

// The worker processes hold none of the keys of the environment the driver runs in: read from
// /proc/<pid>/environ of the live reference process.
func TestWorkersHoldNoKey(t *testing.T) {
	for _, k := range []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "KBP_TEST_SECRET_TOKEN"} {
		t.Setenv(k, "sk-canary-"+strings.ToLower(k))
	}
	e := newEvaluator(t, nil)
	res := e.Evaluate(context.Background(), loadTask(t, "scale_relu"), loadKernel(t, "zeros"), "cpu", nil)
	if res.Verdict == VerdictError {
		t.Fatalf("got %s %s: %s", res.Verdict, res.ErrorClass, res.Message)
	}
	// The reference process is kept for the task's next evaluation: it is still running.
	var workers []int
	for _, p := range descendants(os.Getpid()) {
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/cmdline"); err == nil && strings.Contains(string(b), "run.py") {
			workers = append(workers, p.pid)
		}
	}
	if len(workers) == 0 {
		t.Fatal("no worker process left to read")
	}
	for _, pid := range workers {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "sk-canary") || strings.Contains(string(b), "KBP_TEST_SECRET") {
			t.Errorf("worker %d holds a key: %q", pid, b)
		}
	}
}

// The work folders of a driver that no longer runs are removed when the next evaluator starts;
// those of a live one (this test's) stay.
func TestDeadDriversWorkFoldersAreSwept(t *testing.T) {
	work := t.TempDir()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(work, "eval-"+strconv.Itoa(dead.Process.Pid)+"-00ff")
	// A driver killed with its parent is a zombie until something reaps it: dead all the same.
	zombie := exec.Command("true")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	defer zombie.Wait()
	for processAlive(zombie.Process.Pid) {
		time.Sleep(5 * time.Millisecond)
	}
	undead := filepath.Join(work, "compile-"+strconv.Itoa(zombie.Process.Pid)+"-00ff")
	live, err := privateDir(work, "ref-")
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(work, "tasks")
	for _, d := range []string{stale, undead, other} {
		if err := os.MkdirAll(filepath.Join(d, "out"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if n := sweepWorkDir(work); n != 2 {
		t.Errorf("removed %d folders, want 2", n)
	}
	for d, want := range map[string]bool{stale: false, undead: false, live: true, other: true} {
		if _, err := os.Stat(d); (err == nil) != want {
			t.Errorf("%s: exists=%v, want %v", d, err == nil, want)
		}
	}
}

func TestCUDAStartHint(t *testing.T) {
	e := &Evaluator{opt: Options{}}
	if h := e.cudaStartHint("cuda:0", "RuntimeError: CUDA error: OS call failed or operation not supported on this OS"); !strings.Contains(h, "sandbox: off") {
		t.Errorf("no hint for CUDA error 304: %q", h)
	}
	for _, c := range []struct{ device, text string }{{"cpu", "operation not supported on this OS"}, {"cuda:0", "out of memory"}} {
		if h := e.cudaStartHint(c.device, c.text); h != "" {
			t.Errorf("%s %q: unexpected hint %q", c.device, c.text, h)
		}
	}
	e.opt.Sandbox = sandbox.ModeOff
	if h := e.cudaStartHint("cuda:0", "error 304"); h != "" {
		t.Errorf("a hint with the sandbox off: %q", h)
	}
}

// TestSandboxStopsCUDA: a kernel whose compile failed because CUDA did not start is blamed on the
// sandbox only when the reference's start, which runs no kernel code, failed the same way; a
// reference that started, a CPU device, another failure or a sandbox turned off leave the
// kernel's failure as it is.
func TestSandboxStopsCUDA(t *testing.T) {
	e304 := "RuntimeError: Unexpected error from cudaGetDeviceCount(). Error 304: OS call failed or operation not supported on this OS"
	pending := func(err error) *pendingRef {
		p := &pendingRef{c: make(chan struct{}), err: err}
		if err == nil {
			p.ref = &refServer{}
		}
		close(p.c)
		return p
	}
	refFailed := pending(&refFailure{err: errors.New("hello: worker exited"), log: e304})
	on := &Evaluator{opt: Options{Sandbox: sandbox.ModeBestEffort}}
	off := &Evaluator{opt: Options{Sandbox: sandbox.ModeOff}}
	msg, ok := on.sandboxStopsCUDA("cuda:0", "runtime_error: "+e304, refFailed)
	if !ok || !strings.Contains(msg, "in the kernel's process nor in the reference's") || !strings.Contains(msg, "sandbox: off") {
		t.Errorf("both failed: %v %q", ok, msg)
	}
	for name, c := range map[string]struct {
		e      *Evaluator
		device string
		cand   string
		ref    *pendingRef
	}{
		"reference started":   {on, "cuda:0", e304, pending(nil)},
		"cpu":                 {on, "cpu", e304, refFailed},
		"another failure":     {on, "cuda:0", "error: expected ';' before '}'", refFailed},
		"reference otherwise": {on, "cuda:0", e304, pending(errors.New("hello: ModuleNotFoundError: no module named torch"))},
		"sandbox off":         {off, "cuda:0", e304, refFailed},
	} {
		if msg, ok := c.e.sandboxStopsCUDA(c.device, c.cand, c.ref); ok {
			t.Errorf("%s: blamed on the sandbox: %q", name, msg)
		}
	}
}
