package cli

import (
	"os"
	"strings"
	"testing"
	"time"
)

// A task whose inputs would not fit in the machine's memory is refused on the CPU before anything
// runs, with a hint; memory_share moves the line.
func TestMemoryGuardRefusesHugeCPUTasks(t *testing.T) {
	env := isolated(t)
	dir := t.TempDir()
	// 2^20 × 2^18 float32: 1 TiB, estimated on the meta device, never allocated.
	huge := writeFile(t, dir, "huge.py", strings.Replace(reluTask, "%s", "return [torch.randn(1 << 20, 1 << 18)]", 1))
	small := writeFile(t, dir, "small.py", strings.Replace(reluTask, "%s", "return [torch.randn(1 << 16)]", 1))
	relu := "../../examples/kernels/relu/cpp.py"
	fast := []string{"--device", "cpu", "--seeds", "1", "--timed-calls", "5", "--warmup", "1", "--check-calls", "1", "-q"}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want []string // in stderr; nil: runs
	}{
		{"eval", []string{"eval", "--task", huge, "--kernel", relu}, nil, []string{"refused, nothing was run", "huge", "needs about 8192.0 GiB", "--device cuda:0", "memory_share"}},
		{"baseline", []string{"baseline", "--task", huge, "--modes", "eager"}, nil, []string{"refused", "--size"}},
		// Of several tasks, the one that cannot fit is refused and the others are timed.
		{"baseline times what fits", []string{"baseline", "--task", huge, "--task", small, "--modes", "eager"}, nil, []string{"REFUSED", "needs about 8192.0 GiB", "1 of 2 tasks refused"}},
		// With --json -q the exit message alone names what was refused.
		{"baseline names what it refused", []string{"baseline", "--task", huge, "--task", small, "--modes", "eager", "--json"}, nil, []string{"1 of 2 tasks refused", "(file/huge)"}},
		{"validate", []string{"tasks", "validate", huge}, nil, []string{"refused: they need more memory"}},
		{"a small share refuses a small task", []string{"eval", "--task", small, "--kernel", relu}, map[string]string{"KBP_MEMORY_SHARE": "0.0000000001"}, []string{"refused"}},
		{"a small task runs", []string{"eval", "--task", small, "--kernel", relu}, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := map[string]string{"KBP_MEMORY_SHARE": ""}
			for k, v := range env {
				e[k] = v
			}
			for k, v := range tc.env {
				e[k] = v
			}
			start := time.Now()
			out, errOut, code := run(t, e, append(tc.args, fast...)...)
			if tc.want == nil {
				if code != 0 {
					t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
				}
				return
			}
			if code == 0 {
				t.Fatalf("not refused:\n%s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out+errOut, w) {
					t.Errorf("lacks %q:\n%s%s", w, out, errOut)
				}
			}
			if d := time.Since(start); d > time.Minute {
				t.Errorf("refusing took %s", d)
			}
		})
	}
	// The small task's two eager baselines and its evaluation: nothing of the huge one.
	if out, _, _ := run(t, env, "results", "list"); !strings.Contains(out, "3 evaluations") || strings.Contains(out, "huge") {
		t.Errorf("only the small task's baseline and evaluation should be stored:\n%s", out)
	}
}

// An interrupted validate reports the tasks it never ran as not run, not as failures.
func TestInterruptedValidateSaysNotRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	r := binaryRunner{t: t, bin: buildKbplatform(t), env: isolated(t)}
	cmd := r.command("tasks", "validate", "kbp/l1/relu", "kbp/l1/softmax", "kbp/l1/matmul", "kbp/l1/layernorm", "kbp/l1/mse_loss", "--device", "cpu", "--seeds", "1")
	var out, errOut bytesBuffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(errOut.String(), "[2/5]") {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("validate did not reach its second task:\n%s", errOut.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	code := cmd.ProcessState.ExitCode()
	if err == nil || code != 130 {
		t.Fatalf("exit %d (%v), want 130\n%s\n%s", code, err, out.String(), errOut.String())
	}
	o := out.String()
	if strings.Contains(o, "FAIL") || strings.Contains(o, "context canceled") || !strings.Contains(o, "not run") {
		t.Fatalf("interrupted tasks reported as failures:\n%s", o)
	}
	if !strings.Contains(o, "kbp/l1/relu") || !strings.Contains(o, " ok ") && !strings.Contains(o, "ok") {
		t.Errorf("the finished task is missing:\n%s", o)
	}
}
