package contract

import (
	"time"

	"github.com/kbplatform/kbplatform/internal/gpulock"
)

// cpuTurn runs timed (a CPU evaluation's timed calls) holding this process's CPUs, so that two
// kbplatform processes on one host (two eval commands, a baseline beside a study) time their
// kernels in turns rather than into each other's numbers: two timings on two cores each read
// about half speed, and only "noisy" warnings said so. The lock is gpulock's, one per CPU of the
// process's affinity, so processes confined to other CPUs are not held up.
//
// Only the timed calls take turns, not the whole evaluation as on a GPU: on the CPU the other
// phases (a C++ build of minutes, the correctness trials) time nothing, and one command's build
// need not wait for another's study. They can still run beside another process's timed calls and
// slow them, as any program outside kbplatform can.
//
// The wait is outside the evaluation's time limit (limit.go). When the CPUs cannot be locked (no
// temporary folder to hold the lock files, no sched_getaffinity) the timing runs anyway, and
// cpuTurn returns the reason for the cpu_shared flag; it returns "" otherwise, and on GPUs.
func (r *evalRun) cpuTurn(device string, timed func()) (shared string) {
	if device != "cpu" {
		timed()
		return ""
	}
	cpus, err := gpulock.CPUs()
	var held *gpulock.Held
	if err == nil {
		resume := r.limit.pause()
		t0 := time.Now()
		held, err = gpulock.LockCPUs(r.limit.parent, gpulock.Eval, cpus, func(b *gpulock.Busy) {
			r.e.progress("cpu: waiting for %s, where another kbplatform process is timing (%s): timed calls share their CPUs with no other timing", b.What, b.Holder)
		})
		resume()
		if waited := time.Since(t0); waited > time.Second {
			r.e.progress("cpu: CPUs %s taken after %.1fs", gpulock.CPUList(cpus), waited.Seconds())
		}
	}
	defer held.Release()
	timed() // also when stopped from outside while waiting: its first call says so
	if err != nil && r.limit.parent.Err() == nil {
		return "the timed calls could not take their turn at this host's CPUs, so another kbplatform process may have timed its kernels beside them: " + err.Error()
	}
	return ""
}
