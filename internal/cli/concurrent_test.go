package cli

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// bytesBuffer is a bytes.Buffer safe to read while a process writes into it.
type bytesBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *bytesBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *bytesBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// While a study runs in one kbplatform process, every other command on the same database works
// from other processes: reads see what the study committed so far, and a second writer (eval)
// stores its record through the study's process.
func TestCommandsWorkWhileAStudyRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a study")
	}
	r := binaryRunner{t: t, bin: buildKbplatform(t), env: isolated(t)}
	fast := []string{"--device", "cpu", "--seeds", "1", "--timed-calls", "10", "--warmup", "1", "--check-calls", "2"}
	tasks := "kbp/l1/relu,kbp/l1/softmax,kbp/l1/mse_loss"
	study := r.command(append([]string{"study", "run", "--tasks", tasks, "--model", "replay",
		"--model-config", `{"source":"examples","backend":"cpp"}`}, fast...)...)
	var studyOut, studyErr bytesBuffer
	study.Stdout, study.Stderr = &studyOut, &studyErr
	if err := study.Start(); err != nil {
		t.Fatal(err)
	}
	finished := make(chan error, 1)
	go func() { finished <- study.Wait() }()

	count := regexp.MustCompile(`(\d+) evaluations in`)
	var seenDuring []int // evaluations listed while the study was still running
	var studyID, shown string
	running := true
	evalDone := false
	for running {
		select {
		case err := <-finished:
			running = false
			if err != nil {
				t.Fatalf("study: %v\n%s\n%s", err, studyOut.String(), studyErr.String())
			}
			continue
		case <-time.After(time.Second):
		}
		out, errOut, code := r.run("results", "list", "-q")
		if code != 0 {
			t.Fatalf("results list while the study runs: %d\n%s", code, errOut)
		}
		if m := count.FindStringSubmatch(out); m != nil {
			n, _ := strconv.Atoi(m[1])
			if study.ProcessState == nil {
				seenDuring = append(seenDuring, n)
			}
		}
		if out, errOut, code := r.run("tasks", "list", "--level", "1", "-q"); code != 0 || !strings.Contains(out, "kbp/l1/relu") {
			t.Fatalf("tasks list while the study runs: %d\n%s", code, errOut)
		}
		out, errOut, code = r.run("study", "list", "-q")
		if code != 0 {
			t.Fatalf("study list while the study runs: %d\n%s", code, errOut)
		}
		if f := strings.Fields(lastLine(out)); studyID == "" && len(f) > 0 && f[0] != "ID" {
			studyID = f[0]
		}
		if studyID != "" {
			if out, errOut, code := r.run("study", "show", studyID, "-q"); code != 0 {
				t.Fatalf("study show while the study runs: %d\n%s", code, errOut)
			} else {
				shown = out
			}
		}
		// A second writer, once, while the study holds the database.
		if !evalDone && len(seenDuring) > 0 && seenDuring[len(seenDuring)-1] > 0 {
			evalDone = true
			out, errOut, code := r.run(append([]string{"eval", "--task", "kbp/l1/relu", "--kernel", "../../examples/kernels/relu/cpp.py"}, fast...)...)
			if code != 0 || !strings.Contains(out, "PASS") {
				t.Fatalf("eval while the study runs: %d\n%s\n%s", code, out, errOut)
			}
			if !strings.Contains(errOut, "going through it") {
				t.Errorf("eval did not say it went through the study's process:\n%s", errOut)
			}
		}
	}
	if len(seenDuring) == 0 || !evalDone {
		t.Fatalf("no listing while the study ran (seen %v, eval %v)", seenDuring, evalDone)
	}
	final, _, code := r.run("results", "list")
	m := count.FindStringSubmatch(final)
	if code != 0 || m == nil || m[1] != "4" {
		t.Fatalf("after the study: three study evaluations and one eval expected:\n%s", final)
	}
	if seenDuring[0] >= 4 {
		t.Errorf("the first listing already saw everything (%v): it did not overlap the study", seenDuring)
	}
	if !strings.Contains(shown, "kbp/l1/relu") {
		t.Errorf("study show during the run:\n%s", shown)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
