package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A single-node Slurm cluster started by the test (scripts/slurm/single-node) runs two workers
// through the sbatch template, and a batch of evaluations is judged by both.
func TestSlurmWorkers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Slurm, builds the binary and runs workers")
	}
	var missing []string
	for _, b := range []string{"munged", "mungekey", "slurmctld", "slurmd", "sbatch", "sinfo", "squeue", "scancel"} {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		t.Skipf("Slurm binaries missing (%s): apt-get install -y slurmctld slurmd munge slurm-client (scripts/test installs them)", strings.Join(missing, ", "))
	}
	if os.Geteuid() != 0 {
		t.Skip("a single-node Slurm cluster needs root (slurmd runs jobs as their users)")
	}
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	dir, err := os.MkdirTemp("", "kbp-slurm-") // short: munge's socket path must fit
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(root, "scripts", "slurm", "single-node")
	b, err := exec.Command(script, "start", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("single-node start: %v\n%s", err, b)
	}
	conf := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(b)), "export SLURM_CONF="))
	defer func() {
		// stop cancels the jobs and waits for them before it stops the daemons.
		if out, err := exec.Command(script, "stop", dir).CombinedOutput(); err != nil {
			t.Logf("single-node stop: %v\n%s", err, out)
		}
	}()
	t.Setenv("SLURM_CONF", conf)

	env := isolated(t)
	r := binaryRunner{t: t, bin: buildKbplatform(t), env: env}
	kernels := clusterKernels(t, 4)
	args := append([]string{"eval", "--target", "cluster", "--device", "cpu", "--task", "kbp/l1/relu", "--size", "cpu"}, clusterContract...)
	for _, k := range kernels {
		args = append(args, "--kernel", k)
	}
	eval := r.command(args...)
	var out, errOut bytesBuffer
	eval.Stdout, eval.Stderr = &out, &errOut
	if err := eval.Start(); err != nil {
		t.Fatal(err)
	}
	defer eval.Process.Kill()

	// The template as a user submits it, for CPU workers: no GPU, one core each.
	sb := exec.Command("sbatch", "--gres=none", "--cpus-per-task=1", "--array=0-1",
		"--output="+filepath.Join(dir, "worker-%A_%a.log"), filepath.Join(root, "scripts", "slurm", "worker.sbatch"))
	sb.Env = r.command().Env
	sb.Env = append(sb.Env, "KBP="+r.bin)
	if b, err := sb.CombinedOutput(); err != nil {
		t.Fatalf("sbatch: %v\n%s", err, b)
	}
	logs := func() string {
		var all []string
		files, _ := filepath.Glob(filepath.Join(dir, "worker-*.log"))
		for _, f := range files {
			b, _ := os.ReadFile(f)
			all = append(all, fmt.Sprintf("== %s\n%s", f, b))
		}
		return strings.Join(all, "\n")
	}
	done := make(chan error, 1)
	go func() { done <- eval.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("eval: %v\nstderr:\n%s\nworkers:\n%s", err, errOut.String(), logs())
		}
	case <-time.After(10 * time.Minute):
		t.Fatalf("eval did not finish\nstderr:\n%s\nworkers:\n%s", errOut.String(), logs())
	}
	evs := storedEvals(t, r)
	if len(evs) != len(kernels) {
		t.Fatalf("%d evaluations stored for %d kernels", len(evs), len(kernels))
	}
	judges := map[string]int{}
	for _, ev := range evs {
		w, _ := fingerprintOf(ev)["cluster_worker"].(string)
		if !strings.Contains(w, "-slurm") {
			t.Errorf("evaluation judged by %q, not a Slurm worker", w)
		}
		judges[w]++
	}
	if len(judges) != 2 {
		t.Errorf("judged by %v: want both Slurm workers\n%s", judges, logs())
	}
}
