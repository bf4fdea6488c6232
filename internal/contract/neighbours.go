package contract

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kbplatform/kbplatform/internal/cudadev"
	"github.com/kbplatform/kbplatform/sdk"
)

// GPUProcess is one process that holds a context on a GPU, as the driver lists it.
type GPUProcess struct {
	PID     int
	Name    string
	UsedMiB int64 // -1 when the driver does not say
}

// ListGPUProcesses lists the compute processes on a CUDA device through nvidia-smi, for the GPU
// the device names on this host (cudadev).
func ListGPUProcesses(device string) ([]GPUProcess, error) {
	idx, ok := cudadev.HostID(device)
	if !ok {
		return nil, fmt.Errorf("not a CUDA device: %q", device)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "nvidia-smi", "-i", idx, "--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader,nounits").Output()
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi: %v", err)
	}
	return parseComputeApps(out)
}

// parseComputeApps reads nvidia-smi's "pid, process_name, used_memory" rows. A process name may
// hold commas, so the first and last fields are split off and the rest is the name.
func parseComputeApps(out []byte) ([]GPUProcess, error) {
	var ps []GPUProcess
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "No running") {
			continue
		}
		first, rest, ok1 := strings.Cut(line, ",")
		i := strings.LastIndexByte(rest, ',')
		pid, err := strconv.Atoi(strings.TrimSpace(first))
		if !ok1 || i < 0 || err != nil {
			return nil, fmt.Errorf("nvidia-smi: unexpected compute-apps row %q", line)
		}
		used, err := strconv.ParseInt(strings.TrimSpace(rest[i+1:]), 10, 64)
		if err != nil {
			used = -1 // "[N/A]" where the driver does not account per process
		}
		ps = append(ps, GPUProcess{PID: pid, Name: strings.TrimSpace(rest[:i]), UsedMiB: used})
	}
	return ps, nil
}

// The neighbour check. The GPU lock keeps kbplatform's own evaluations apart, and an evaluation
// stops its idle side and the host's spares while it times; nothing in kbplatform can stop a
// program it did not start. Such a program's kernels share the SMs and the memory bandwidth with
// the timed calls, and a study would print its slowdown as a speedup or a regression. So the
// driver asks the GPU's driver which processes hold a context on the device just before the
// timed calls and just after them, and flags the timing (sdk.FlagGPUShared) when one of them is
// neither this evaluation's nor another kbplatform worker's (whose kernels the GPU lock keeps
// out of the timing). The check reads the lists outside the timed region: nvidia-smi costs tens
// of milliseconds of driver calls, which must not land between two timed calls.

// neighbourLook is one look at a GPU's process list, taken in the background.
type neighbourLook struct {
	done  chan struct{}
	procs []GPUProcess
	err   error
	// workers are the listed processes that were kbplatform workers (or below one) when the list
	// was read. Told apart at once, not when the timing is judged seconds later: another
	// command's worker that has exited by then has no command line left to show what it was.
	workers map[int]bool
}

// wait returns once the look is done (at once for none).
func (l *neighbourLook) wait() {
	if l != nil {
		<-l.done
	}
}

// scanNeighbours starts one look at the device's process list. Devices other than CUDA ones have
// no list to read (nil).
func (r *evalRun) scanNeighbours(device string) *neighbourLook {
	if !strings.HasPrefix(device, "cuda") || r.e.opt.GPUProcesses == nil {
		return nil
	}
	l := &neighbourLook{done: make(chan struct{})}
	go func() {
		defer close(l.done)
		l.procs, l.err = r.e.opt.GPUProcesses(device)
		l.workers = map[int]bool{}
		for _, p := range l.procs {
			if kbplatformWorker(p.PID) {
				l.workers[p.PID] = true
			}
		}
	}()
	return l
}

// judgeNeighbours reads the looks taken before and after the timed calls and flags the timing
// when a program outside kbplatform held the GPU at either.
func (r *evalRun) judgeNeighbours(device string, looks ...*neighbourLook) {
	var listed []GPUProcess
	workers := map[int]bool{}
	for _, l := range looks {
		if l == nil {
			return
		}
		l.wait()
		if l.err != nil {
			r.res.Warnings = append(r.res.Warnings, fmt.Sprintf("could not list the processes on %s to check that nothing outside kbplatform ran beside the timed calls: %v", device, l.err))
			return
		}
		listed = append(listed, l.procs...)
		for pid := range l.workers {
			workers[pid] = true
		}
	}
	own := map[int]bool{}
	for _, p := range []*proc{r.ref.p, r.cand} {
		if pid := p.pid(); pid > 0 {
			own[pid] = true
			for _, d := range descendants(pid) {
				own[d.pid] = true
			}
		}
	}
	// Both of the evaluation's processes hold a context on the device while it times. A list that
	// names neither comes from another PID namespace (a container that cannot see the host's
	// process numbers): its processes cannot be told apart, and nothing is flagged.
	if !slices.ContainsFunc(listed, func(p GPUProcess) bool { return own[p.PID] }) {
		r.res.Warnings = append(r.res.Warnings, fmt.Sprintf("the GPU driver's process list for %s does not name this evaluation's processes (another PID namespace?): no check that nothing outside kbplatform ran beside the timed calls", device))
		return
	}
	var foreign []string
	seen := map[int]bool{}
	for _, p := range listed {
		if own[p.PID] || seen[p.PID] || workers[p.PID] {
			continue
		}
		seen[p.PID] = true
		desc := fmt.Sprintf("pid %d", p.PID)
		if p.Name != "" {
			desc += " (" + p.Name
			if p.UsedMiB >= 0 {
				desc += fmt.Sprintf(", %d MiB", p.UsedMiB)
			}
			desc += ")"
		}
		foreign = append(foreign, desc)
	}
	if len(foreign) > 0 {
		r.res.AddFlag(Flag{Name: sdk.FlagGPUShared, Reason: fmt.Sprintf("outside kbplatform, %s held a context on %s when the timed calls started or ended; what it ran there shared the GPU with them",
			strings.Join(foreign, ", "), device)})
	}
}

// kbplatformWorker reports whether a process is a contract worker (this driver's or another
// kbplatform's on the same host) or runs below one: its command line, or an ancestor's, runs a
// run.py that sits beside the worker's kbpworker package. Those obey the GPU lock, so their
// kernels never run beside a timed call; a helper a worker started (torch.compile's compile
// workers, say) is one of them.
func kbplatformWorker(pid int) bool {
	buf := make([]byte, 512)
	for depth := 0; pid > 1 && depth < 64; depth++ {
		if runsWorkerScript(pid) {
			return true
		}
		st, ok := readStatBuf(pid, buf)
		if !ok {
			return false // gone, or not visible from here: not known to be one
		}
		pid = st.ppid
	}
	return false
}

// runsWorkerScript reports whether a process's command line runs the contract worker's run.py.
func runsWorkerScript(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	for _, arg := range bytes.Split(b, []byte{0}) {
		if a := string(arg); filepath.Base(a) == "run.py" {
			if !filepath.IsAbs(a) {
				cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
				if err != nil {
					return false
				}
				a = filepath.Join(cwd, a)
			}
			if st, err := os.Stat(filepath.Join(filepath.Dir(a), "kbpworker")); err == nil && st.IsDir() {
				return true
			}
		}
	}
	return false
}
