package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// A study stopped with Ctrl-C summarises the units that ran, and says how many did not: its
// fast_0 is not diluted by tasks it never reached (it read 0.17 over six units when one had run).
func TestInterruptedStudyReportsTheUnitsThatRan(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a study")
	}
	r := binaryRunner{t: t, bin: buildKbplatform(t), env: isolated(t)}
	file, _ := filepath.Abs(filepath.Join("..", "..", "examples", "studies", "ci.yaml"))
	cmd := r.command(append([]string{"study", "run", file, "--parallel", "1"}, fastContract...)...)
	var out, errOut bytesBuffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(5 * time.Minute)
	for !strings.Contains(errOut.String(), ": done in ") {
		select {
		case <-exited:
			t.Fatalf("the study ended before it could be interrupted:\n%s\n%s", out.String(), errOut.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no unit finished:\n%s", errOut.String())
		}
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the study did not stop after Ctrl-C:\n%s", errOut.String())
	}
	o := out.String()
	m := regexp.MustCompile(`study [0-9a-f]{20}: fast_0 (\S+) .*\((\d+) tasks; (\d+) of 6 units did not run, left out: run the study again to resume\)`).FindStringSubmatch(o)
	if m == nil {
		t.Fatalf("the summary does not say how many units did not run:\n%s\n%s", o, errOut.String())
	}
	ran, notRun := atoi(t, m[2]), atoi(t, m[3])
	if ran < 1 || ran+notRun != 6 || notRun < 1 {
		t.Errorf("%d units ran and %d did not, of 6", ran, notRun)
	}
	// The replayed kernels are the honest examples: every unit that ran passed.
	if m[1] != "1.00" {
		t.Errorf("fast_0 %s over the %d units that ran, want 1.00:\n%s", m[1], ran, o)
	}
	if n := strings.Count(o, " not run "); n != notRun {
		t.Errorf("%d rows say not run, want %d:\n%s", n, notRun, o)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("not a number: %q", s)
		}
		n = n*10 + int(c-'0')
	}
	return n
}
