package cli

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// clusterKernels writes n pure-PyTorch ReLU kernels that differ only in a comment: distinct
// kernels (hashes) that need no build.
func clusterKernels(t *testing.T, n int) []string {
	t.Helper()
	dir := t.TempDir()
	var out []string
	for i := 0; i < n; i++ {
		p := filepath.Join(dir, fmt.Sprintf("relu_%d.py", i))
		src := fmt.Sprintf("# variant %d\nimport torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n", i)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// clusterWorker is a running `kbplatform worker`.
type clusterWorker struct {
	cmd *exec.Cmd
	log *bytesBuffer
}

func startWorkers(t *testing.T, r binaryRunner, n int, args ...string) []*clusterWorker {
	t.Helper()
	var ws []*clusterWorker
	for i := 0; i < n; i++ {
		w := &clusterWorker{cmd: r.command(append([]string{"worker"}, args...)...), log: &bytesBuffer{}}
		w.cmd.Stdout, w.cmd.Stderr = w.log, w.log
		if err := w.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = w.cmd.Process.Signal(syscall.SIGTERM)
			_ = w.cmd.Wait()
			if t.Failed() {
				t.Logf("worker %d log:\n%s", w.cmd.Process.Pid, w.log.String())
			}
		})
		ws = append(ws, w)
	}
	return ws
}

// waitFor polls cond until it holds or the time is up.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
	}
}

var workerIDRE = regexp.MustCompile(`worker (\S+): kind (\S+)`)

func (w *clusterWorker) id() string {
	if m := workerIDRE.FindStringSubmatch(w.log.String()); m != nil {
		return m[1]
	}
	return ""
}

// storedEvals reads the evaluations as `results list --json` prints them.
func storedEvals(t *testing.T, r binaryRunner) []map[string]any {
	t.Helper()
	out, errOut, code := r.run("results", "list", "--json")
	if code != 0 {
		t.Fatalf("results list: %d\n%s", code, errOut)
	}
	var evs []map[string]any
	if err := json.Unmarshal([]byte(out), &evs); err != nil {
		t.Fatalf("results list --json: %v\n%s", err, out)
	}
	return evs
}

func fingerprintOf(ev map[string]any) map[string]any {
	res, _ := ev["result"].(map[string]any)
	fp, _ := res["fingerprint"].(map[string]any)
	return fp
}

// clusterContract keeps the cluster tests' CPU evaluations short.
var clusterContract = []string{"--seeds", "1", "--timed-calls", "5", "--warmup", "1", "--check-calls", "2"}

// Three workers on the embedded server: a batch of evaluations spreads over them; the worker
// killed (-9) in the middle of one loses it to another worker, which judges it once; nothing the
// killed worker started outlives it; and a job of a kind no worker has waits, untouched.
func TestClusterEmbedded(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs workers")
	}
	env := isolated(t)
	env["KBP_CLUSTER_ACK_WAIT"] = "20m" // far off: the kill is noticed through the worker's presence
	r := binaryRunner{t: t, bin: buildKbplatform(t), env: env}
	ws := startWorkers(t, r, 3, "--device", "cpu")
	kernels := clusterKernels(t, 5)
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

	// Kill -9 the first worker to start a job, once its candidate's processes are up.
	var victim *clusterWorker
	waitFor(t, 4*time.Minute, "a worker to start a job", func() bool {
		for _, w := range ws {
			if strings.Contains(w.log.String(), ": evaluate kbp/l1/relu") {
				victim = w
				return true
			}
		}
		return false
	})
	victimID := victim.id()
	waitFor(t, 2*time.Minute, "the victim's contract processes", func() bool { return len(procTree(victim.cmd.Process.Pid)) >= 3 })
	time.Sleep(2 * time.Second) // well inside the evaluation
	tree := procTree(victim.cmd.Process.Pid)
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := eval.Wait(); err != nil {
		t.Fatalf("eval: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
	}
	for end := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		var alive []string
		for _, p := range tree {
			if p.alive() {
				alive = append(alive, p.cmd)
			}
		}
		if len(alive) == 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("processes of the killed worker still alive: %v", alive)
		}
	}

	evs := storedEvals(t, r)
	if len(evs) != len(kernels) {
		t.Fatalf("%d evaluations stored for %d kernels", len(evs), len(kernels))
	}
	judges := map[string]int{}
	redelivered := 0
	for _, ev := range evs {
		fp := fingerprintOf(ev)
		w, _ := fp["cluster_worker"].(string)
		judges[w]++
		res := ev["result"].(map[string]any)
		if res["verdict"] != "pass" || ev["target"] != "target/cluster/cpu" && ev["target"] != "cluster/cpu" {
			t.Errorf("evaluation %v: verdict %v, target %v", ev["id"], res["verdict"], ev["target"])
		}
		if fp["cluster_deliveries"] == "2" {
			redelivered++
			if w == victimID {
				t.Errorf("the redelivered job was judged by the killed worker %s", w)
			}
		}
	}
	if judges[victimID] != 0 {
		t.Errorf("the killed worker %s judged %d stored evaluations", victimID, judges[victimID])
	}
	if redelivered != 1 {
		t.Errorf("%d evaluations on a second delivery, want 1 (the killed worker's): %v", redelivered, judges)
	}
	if len(judges) != 2 {
		t.Errorf("evaluations judged by %v: want both surviving workers", judges)
	}

	// A job for a kind no worker has stays queued; the cpu workers never take it.
	// (--compile-workers 1: no compile jobs ahead, the evaluation itself is queued.)
	h200 := r.command(append([]string{"eval", "--target", "cluster", "--device", "cuda:h200", "--compile-workers", "1", "--task", "kbp/l1/relu", "--size", "cpu", "--kernel", kernels[0]}, clusterContract...)...)
	var hOut bytesBuffer
	h200.Stdout, h200.Stderr = &hOut, &hOut
	if err := h200.Start(); err != nil {
		t.Fatal(err)
	}
	defer h200.Process.Kill()
	waitFor(t, time.Minute, "the h200 job to be queued", func() bool {
		if h200.ProcessState != nil {
			t.Fatalf("the h200 eval ended:\n%s", hOut.String())
		}
		return strings.Contains(hOut.String(), "queued on kbp.eval.h200")
	})
	time.Sleep(3 * time.Second)
	dout, derr, code := r.run("target", "describe", "--target", "cluster", "--json")
	if code != 0 {
		t.Fatalf("target describe: %d\n%s", code, derr)
	}
	if !strings.Contains(dout, "kind:h200 workers=0 queued=1 running=0 done=0") || !strings.Contains(dout, "kind:cpu workers=2 queued=0 running=0 done=5") {
		t.Errorf("target describe: want the h200 job queued and the cpu jobs done:\n%s", dout)
	}
	for _, w := range ws {
		if strings.Contains(w.log.String(), "h200") {
			t.Errorf("a cpu worker saw an h200 job:\n%s", w.log.String())
		}
	}
	_ = h200.Process.Signal(syscall.SIGINT)
	_ = h200.Wait()
}

// freePort is a loopback TCP port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// buildNATSServer builds nats-server from the module kbplatform embeds.
func buildNATSServer(t *testing.T) string {
	t.Helper()
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	out := filepath.Join(t.TempDir(), "nats-server")
	cmd := exec.Command("go", "build", "-o", out, "github.com/nats-io/nats-server/v2")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build nats-server: %v\n%s", err, b)
	}
	return out
}

// A real NATS server, named by URL and with a password, restarted in the middle of a batch: the
// workers and the study ride it out and every evaluation is stored once.
func TestClusterServerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and nats-server, runs workers")
	}
	natsBin := buildNATSServer(t)
	port := freePort(t)
	store := t.TempDir()
	startServer := func() *exec.Cmd {
		s := exec.Command(natsBin, "-js", "-sd", store, "-a", "127.0.0.1", "-p", fmt.Sprint(port), "--user", "kbp", "--pass", "s3cret")
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		return s
	}
	srv := startServer()
	defer func() { _ = srv.Process.Kill(); _, _ = srv.Process.Wait() }()

	env := isolated(t)
	cfg := filepath.Join(t.TempDir(), "kbplatform.yaml")
	yaml := fmt.Sprintf("cluster:\n  url: nats://127.0.0.1:%d\n  user: kbp\n  password: s3cret\n", port)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	env["KBP_CONFIG"] = cfg
	r := binaryRunner{t: t, bin: buildKbplatform(t), env: env}
	ws := startWorkers(t, r, 2, "--device", "cpu")
	kernels := clusterKernels(t, 3)
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
	waitFor(t, 4*time.Minute, "a worker to start a job", func() bool {
		for _, w := range ws {
			if strings.Contains(w.log.String(), ": evaluate kbp/l1/relu") {
				return true
			}
		}
		return false
	})
	_ = srv.Process.Signal(syscall.SIGTERM)
	_, _ = srv.Process.Wait()
	time.Sleep(2 * time.Second)
	srv = startServer()
	if err := eval.Wait(); err != nil {
		t.Fatalf("eval: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
	}
	evs := storedEvals(t, r)
	if len(evs) != len(kernels) {
		t.Fatalf("%d evaluations stored for %d kernels", len(evs), len(kernels))
	}
	for _, ev := range evs {
		if res := ev["result"].(map[string]any); res["verdict"] != "pass" {
			t.Errorf("evaluation %v: %v %v", ev["id"], res["verdict"], res["message"])
		}
	}
	// Judged once each: the restart made no job run twice.
	runs := 0
	for _, w := range ws {
		runs += strings.Count(w.log.String(), ": done (")
		if strings.Contains(w.log.String(), "another worker's result was stored first") {
			t.Errorf("a job ran on two workers:\n%s", w.log.String())
		}
	}
	if runs != len(kernels) {
		t.Errorf("%d evaluations run for %d kernels", runs, len(kernels))
	}
}

// A second worker cannot take a GPU one already serves on this host; the CPU is not locked.
func TestLockDevice(t *testing.T) {
	t.Setenv("CUDA_VISIBLE_DEVICES", "5,7")
	t.Setenv("TMPDIR", t.TempDir())
	unlock, err := lockDevice("cuda:1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockDevice("cuda:1"); err == nil || !strings.Contains(err.Error(), "GPU 7") {
		t.Errorf("second lock of cuda:1 (GPU 7): %v", err)
	}
	other, err := lockDevice("cuda:0")
	if err != nil {
		t.Errorf("cuda:0 (GPU 5): %v", err)
	} else {
		other()
	}
	unlock()
	again, err := lockDevice("cuda:1")
	if err != nil {
		t.Errorf("after unlock: %v", err)
	} else {
		again()
	}
	for i := 0; i < 2; i++ {
		if _, err := lockDevice("cpu"); err != nil {
			t.Errorf("cpu: %v", err)
		}
	}
}
