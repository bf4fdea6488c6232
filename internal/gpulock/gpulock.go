// Package gpulock keeps a physical GPU of a host to one holder at a time across processes, with
// flock(2) on a file per GPU in the temporary directory. The kernel drops a lock when its process
// dies, however it dies, so a lock file left behind never blocks anyone.
//
// Two locks exist per GPU. A cluster worker holds the "worker" lock for as long as it serves the
// GPU, so two workers never share one. Every evaluation holds the "eval" lock for as long as it
// runs: an evaluation's timing must share its GPU with nothing, and before this lock two
// kbplatform commands started side by side on one GPU (two terminals, a baseline beside a study)
// timed each other's kernels into their numbers without a word.
//
// The host's CPUs are locked the same way, one file per CPU (cpu.go), but only around a CPU
// evaluation's timed calls: see LockCPUs.
package gpulock

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/kbplatform/kbplatform/internal/cudadev"
)

// Kinds of lock.
const (
	Worker = "worker"
	Eval   = "eval"
)

// poll is how often a waiting Lock tries again. flock(2) has no timeout, and a blocked call cannot
// be cancelled, so a waiter polls. When the GPU changes hands the lock lies free for up to one
// poll: 25 ms against evaluations of seconds, for a try that costs microseconds.
const poll = 25 * time.Millisecond

// Physical names the GPU behind device on this host: "N" for cuda:N, or the Nth entry of
// CUDA_VISIBLE_DEVICES when it is set (cuda:N counts within it). Under Slurm the name is kept to
// the job (a job's GPUs are renumbered from 0 and its allocation keeps them to it, so only the
// processes of one job can meet on one). ok is false for a device that is not a GPU.
func Physical(device string) (name string, ok bool) {
	if !strings.HasPrefix(device, "cuda:") {
		return "", false
	}
	if name, ok = cudadev.HostID(device); !ok {
		name = strings.TrimPrefix(device, "cuda:") // not a number: a name of its own, as given
	}
	if job := os.Getenv("SLURM_JOB_ID"); job != "" {
		name = "slurm-job-" + job + "-" + name
	}
	return name, true
}

var notInName = regexp.MustCompile(`[^A-Za-z0-9_=.-]+`)

// unit is one thing a lock keeps: a GPU, or one CPU.
type unit struct {
	file   string // its part of the lock file's name: "gpu-0", "cpu-3"
	what   string // how messages name it: "GPU 0", "CPU 3"
	gpu    string // the GPU's name (Physical), "" for a CPU
	device string // the device as the caller named it
}

func gpuUnit(gpu, device string) unit {
	return unit{file: "gpu-" + notInName.ReplaceAllString(gpu, "_"), what: "GPU " + gpu, gpu: gpu, device: device}
}

func path(kind string, u unit) string {
	return filepath.Join(os.TempDir(), "kbplatform-"+kind+"-"+u.file+".lock")
}

// queuePath is the file beside a lock on which its waiters hold a shared lock while they wait.
func queuePath(kind string, u unit) string {
	return strings.TrimSuffix(path(kind, u), ".lock") + ".queue"
}

// Held is a lock taken (a GPU's, or those of a set of CPUs); Release gives it back.
type Held struct{ fs []*os.File }

// Release gives the lock back. A nil Held (a device that is not a GPU) releases nothing.
func (h *Held) Release() {
	if h == nil {
		return
	}
	// In the reverse of the order taken, so that a waiter for the first never finds it free
	// while a later one is still held.
	for i := len(h.fs) - 1; i >= 0; i-- {
		_ = syscall.Flock(int(h.fs[i].Fd()), syscall.LOCK_UN)
		h.fs[i].Close()
	}
	h.fs = nil
}

// Busy is the error of a lock held by another holder: which GPU (or CPU) and who holds it, as
// the holder wrote it (its pid and command).
type Busy struct {
	What   string // "GPU 0", "CPU 3"
	GPU    string // the GPU's name; "" for a CPU
	Device string
	Holder string
}

func (b *Busy) Error() string {
	return fmt.Sprintf("%s (%s) is held by another process on this host (%s)", b.What, b.Device, b.Holder)
}

// TryLock takes kind's lock of device's GPU at once, or fails with *Busy. A device that is not a
// GPU is not locked here: a CPU evaluation holds its CPUs only while it times (LockCPUs).
func TryLock(kind, device string) (*Held, error) {
	gpu, ok := Physical(device)
	if !ok {
		return nil, nil
	}
	return tryLock(kind, gpuUnit(gpu, device))
}

func tryLock(kind string, u unit) (*Held, error) {
	p := path(kind, u)
	f, err := open(p)
	if err != nil {
		return nil, fmt.Errorf("locking %s (%s): %w", u.what, u.device, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if err == syscall.EWOULDBLOCK {
			b, _ := os.ReadFile(p)
			return nil, &Busy{What: u.what, GPU: u.gpu, Device: u.device, Holder: strings.TrimSpace(string(b))}
		}
		return nil, fmt.Errorf("locking %s (%s): %w", u.what, u.device, err)
	}
	if f.Truncate(0) == nil {
		_, _ = f.WriteAt([]byte(holder()+"\n"), 0)
	}
	return &Held{fs: []*os.File{f}}, nil
}

// Lock takes kind's lock of device's GPU, waiting while another process holds it; waiting, when
// not nil, is told once who holds it. It fails only when ctx ends first or a lock file cannot be
// opened.
//
// Waiting processes take turns with the holder. A process that gives the lock back and asks for it
// again at once (the next evaluation of a batch, microseconds later) would otherwise win it every
// time against a waiter that tries once a poll, and a command started beside a baseline would
// wait for the whole baseline. So a waiter announces itself with a shared lock on the GPU's queue
// file, and Lock takes the GPU at once only when nobody is queued; else it queues too, and the
// GPU goes to whichever waiter tries first after it is given back.
func Lock(ctx context.Context, kind, device string, waiting func(*Busy)) (*Held, error) {
	gpu, ok := Physical(device)
	if !ok {
		return nil, nil
	}
	return lock(ctx, kind, gpuUnit(gpu, device), waiting)
}

func lock(ctx context.Context, kind string, u unit, waiting func(*Busy)) (*Held, error) {
	q, err := open(queuePath(kind, u))
	if err != nil {
		return nil, fmt.Errorf("locking %s (%s): %w", u.what, u.device, err)
	}
	defer q.Close() // drops this process's place in the queue, if it took one
	queued, told := false, false
	for {
		var b *Busy // nil when this round deferred to a queued waiter without trying
		if queued || !othersQueued(q) {
			h, err := tryLock(kind, u)
			var busy bool
			if b, busy = err.(*Busy); !busy {
				return h, err
			}
		}
		if !queued {
			// Fails only while another process looks at the queue (othersQueued), for
			// microseconds: the next round tries again.
			queued = syscall.Flock(int(q.Fd()), syscall.LOCK_SH|syscall.LOCK_NB) == nil
		}
		if !told && waiting != nil {
			if b == nil {
				last, _ := os.ReadFile(path(kind, u)) // who holds it now, or held it last
				b = &Busy{What: u.what, GPU: u.gpu, Device: u.device, Holder: strings.TrimSpace(string(last)) + "; another process waits for it first"}
			}
			waiting(b)
			told = true
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(poll):
		}
	}
}

// othersQueued says whether any process holds a place in the queue q: a place is a shared lock,
// which an exclusive try cannot take while one exists. The try is given back at once.
func othersQueued(q *os.File) bool {
	if err := syscall.Flock(int(q.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return true
	}
	_ = syscall.Flock(int(q.Fd()), syscall.LOCK_UN)
	return false
}

// open opens (creating) a lock file that every user of the host can lock: flock needs only a
// descriptor, so a file another user created, which this one cannot write, is opened read-only.
func open(p string) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o666)
	if err == nil {
		_ = f.Chmod(0o666) // whatever the umask: the next user must open it too
		return f, nil
	}
	if os.IsPermission(err) {
		return os.Open(p)
	}
	return nil, err
}

// holder says who holds a lock: this process and the command that started it (an evaluation
// runs in a target plugin, whose own command line says little).
func holder() string {
	s := fmt.Sprintf("pid %d", os.Getpid())
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", os.Getppid())); err == nil && len(b) > 0 {
		cmd := strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
		if len(cmd) > 200 {
			cmd = cmd[:200] + "..."
		}
		s += fmt.Sprintf(", started by pid %d: %s", os.Getppid(), cmd)
	}
	return s
}
