package contract

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// smallWorkDir mounts a tmpfs of size (as mount's size= option) to serve as a work folder.
func smallWorkDir(t *testing.T, size string) string {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root to mount a small tmpfs as the work folder and fill it")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s)", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// fillTo leaves about leave bytes free on dir's file system with one allocated file, and returns
// a func that removes it.
func fillTo(t *testing.T, dir string, leave int64) func() {
	t.Helper()
	free, err := workFreeBytes(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if free > leave {
		if err := unix.Fallocate(int(f.Fd()), 0, 0, free-leave); err != nil {
			t.Fatal(err)
		}
	}
	return func() { os.Remove(path) }
}

// evaluatorIn is newEvaluator with its work folder in dir, and a hook on its progress messages.
func evaluatorIn(t *testing.T, dir string, hook func(string)) *Evaluator {
	t.Helper()
	e := newEvaluator(t, nil)
	e2, err := New(Options{Python: testPython(t), WorkDir: dir, CacheDir: sharedCache, Config: e.Config(),
		Progress: func(m string) {
			t.Log(m)
			if hook != nil {
				hook(m)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e2.Close)
	return e2
}

// wantPlatformFull checks that res is a platform error that names the work folder, its room and
// what to do.
func wantPlatformFull(t *testing.T, res *Result, dir string) {
	t.Helper()
	t.Logf("%s %s %s: %s", res.Verdict, res.ErrorClass, res.Phase, res.Message)
	if res.Verdict != VerdictError || res.ErrorClass != ClassHarness {
		t.Fatalf("verdict %s class %s phase %s, want error harness_error: %s", res.Verdict, res.ErrorClass, res.Phase, res.Message)
	}
	for _, w := range []string{dir, "MiB free", "work_dir (KBP_WORK_DIR)", "no verdict about the kernel"} {
		if !strings.Contains(strings.ToLower(res.Message), strings.ToLower(w)) {
			t.Errorf("the message lacks %q: %s", w, res.Message)
		}
	}
}

// A work folder that fills while a kernel is evaluated (the dumps of its first trial find no
// room) gives a platform error that names the folder, its room and what to do: not a crash of
// the candidate's process (SIGBUS in a mapped dump) blamed on the kernel. With room again, the
// same evaluator passes the same kernel.
func TestWorkDirFillsDuringEvaluation(t *testing.T) {
	dir := smallWorkDir(t, "64m")
	var unfill func()
	e := evaluatorIn(t, dir, func(m string) {
		if strings.HasPrefix(m, "loading ") && unfill == nil {
			unfill = fillTo(t, dir, 1<<20) // after the room was checked, before any trial
		}
	})
	task, k := loadTask(t, "scale_relu_wide"), loadKernel(t, "honest_torch")
	res := e.Evaluate(context.Background(), task, k, "cpu", nil)
	if unfill == nil {
		t.Fatalf("the evaluation never loaded the kernel: %s %s %s", res.Verdict, res.ErrorClass, res.Message)
	}
	wantPlatformFull(t, res, dir)
	if res.Phase != "correctness" || !strings.Contains(res.Message, "is full") {
		t.Errorf("phase %s, want a full folder found in correctness: %s", res.Phase, res.Message)
	}
	unfill()
	if res := e.Evaluate(context.Background(), task, k, "cpu", nil); res.Verdict != Pass {
		t.Fatalf("with room again: %s %s %s", res.Verdict, res.ErrorClass, res.Message)
	}
}

// A work folder without room for what an evaluation writes is refused before the kernel runs:
// short of the minimum, before anything starts; short of the task's dumps (which its reference
// measures), before the kernel loads.
func TestWorkDirShortBeforeEvaluation(t *testing.T) {
	dir := smallWorkDir(t, "64m")
	task, k := loadTask(t, "scale_relu_wide"), loadKernel(t, "honest_torch")
	for _, tc := range []struct {
		name  string
		leave int64
		says  string
	}{
		{"below the minimum", 4 << 20, "before any dump"},
		{"below the task's dumps", 12 << 20, "one trial's outputs and inputs as files: 8.0 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			loaded := false
			e := evaluatorIn(t, dir, func(m string) { loaded = loaded || strings.HasPrefix(m, "loading ") })
			unfill := fillTo(t, dir, tc.leave)
			defer unfill()
			res := e.Evaluate(context.Background(), task, k, "cpu", nil)
			wantPlatformFull(t, res, dir)
			if res.Phase != "start" || loaded || !strings.Contains(res.Message, tc.says) {
				t.Errorf("phase %s, kernel loaded %v; want it refused at the start saying %q: %s", res.Phase, loaded, tc.says, res.Message)
			}
		})
	}
}

// A kernel's process that says the disk is full is believed only when the driver finds it so:
// on a work folder with room its failure is the kernel's; on a folder the kernel filled itself,
// too.
func TestKernelClaimsOfAFullDisk(t *testing.T) {
	task := loadTask(t, "scale_relu")
	for _, tc := range []struct {
		name, kernel, size, says string
	}{
		{"a folder with room", "claims_disk_full", "", "reported a full disk, but the work folder"},
		{"a folder the kernel filled", "fills_work_dir", "128m", "the kernel filled it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.size != "" {
				dir = smallWorkDir(t, tc.size)
			}
			e := evaluatorIn(t, dir, nil)
			res := e.Evaluate(context.Background(), task, loadKernel(t, tc.kernel), "cpu", nil)
			t.Logf("%s %s %s: %s", res.Verdict, res.ErrorClass, res.Phase, res.Message)
			if res.Verdict != Fail || res.ErrorClass != ClassRuntime || !strings.Contains(res.Message, tc.says) {
				t.Fatalf("verdict %s class %s: %s; want a runtime_error fail saying %q", res.Verdict, res.ErrorClass, res.Message, tc.says)
			}
		})
	}
}
