package contract

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/kbplatform/kbplatform/internal/diskuse"
)

// An evaluation writes into its folder under the work folder (work_dir, often /dev/shm, a tmpfs
// bounded by RAM): the kernel's file and staged builds, and on the CPU, or wherever tensors do
// not travel by CUDA IPC, every trial's outputs and inputs as files. A work folder that fills is
// the platform's failure, never the kernel's: before the harness allocated its dumps, a full
// tmpfs killed the candidate's process with SIGBUS (a crash, blamed on the kernel).
//
// So the room is checked before an evaluation runs (a statfs: what the task's dumps need, which
// the clean reference process measures once per task and device), and a write that found no room
// during one is judged here. The candidate's process runs untrusted code, and a kernel that says
// "no space left on device" must not turn its failure into a platform error that fast_p leaves
// out: the driver believes the claim only when its own statfs finds the folder really short of
// what the evaluation needs, and the kernel's own files are not what filled it.

// minWorkRoom is what an evaluation writes besides the task's dumps: the kernel's file, the
// rendered task, the workers' temporary files.
const minWorkRoom = 8 << 20

// kernelRoom is how much of its folder a kernel may fill with files of its own (Triton's and
// inductor's caches, a compiler's temporaries) and still be judged the victim of a full disk.
const kernelRoom = 64 << 20

// maxWalk bounds the entries dirBytes reads: a kernel can make millions of files.
const maxWalk = 200000

// workFreeBytes is the room an unprivileged writer has on dir's file system.
func workFreeBytes(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// dirBytes is the disk space the regular files under dir take (diskuse.Of), reading at most
// maxWalk entries.
func dirBytes(dir string) int64 { return diskuse.Of(dir, maxWalk) }

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// isDiskFull reports whether err is a write that found no room.
func isDiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// claimsDiskFull reports whether a worker's failure says a write found no room: the worker names
// the errno behind the exception, and a compiler or a library says it in its output.
func claimsDiskFull(err error, texts ...string) bool {
	var we *workerError
	if errors.As(err, &we) && we.Errno != "" {
		return true
	}
	for _, t := range texts {
		if strings.Contains(t, "No space left on device") || strings.Contains(t, "Disk quota exceeded") {
			return true
		}
	}
	return false
}

// folderAdvice is what to do about a full folder: which setting moves it, and how to see its room.
func folderAdvice(dir, setting string) string {
	return fmt.Sprintf("set %s to a folder on a disk with more room, or free space in %s (df -h %s; /dev/shm is a tmpfs that RAM bounds)", setting, dir, dir)
}

const workSetting = "work_dir (KBP_WORK_DIR)"

// roomShort says why dir, with free bytes, cannot hold an evaluation that needs need, what the
// need is made of (what), and what to do.
func roomShort(dir string, free, need int64, what string) string {
	return fmt.Sprintf("the work folder %s has %s free, and this evaluation needs about %s there (%s); no verdict about the kernel: %s",
		dir, mib(free), mib(need), what, folderAdvice(dir, workSetting))
}

// noRoom turns the driver's own write that found no room in the work folder into the message
// that says so; other errors pass unchanged.
func (e *Evaluator) noRoom(err error) error {
	if err == nil || !isDiskFull(err) {
		return err
	}
	free, _ := workFreeBytes(e.opt.WorkDir)
	return fmt.Errorf("the work folder %s is full (%s free): %v; no verdict about the kernel: %s",
		e.opt.WorkDir, mib(free), err, folderAdvice(e.opt.WorkDir, workSetting))
}

// checkStartRoom is the quick check before an evaluation starts anything: the room every
// evaluation needs besides the task's dumps. "" when there is room, or when the file system's
// room cannot be read.
func (e *Evaluator) checkStartRoom() string {
	free, err := workFreeBytes(e.opt.WorkDir)
	if err != nil || free >= minWorkRoom {
		return ""
	}
	return roomShort(e.opt.WorkDir, free, minWorkRoom, "the kernel's file, the task and the workers' temporary files; "+mib(minWorkRoom)+" before any dump")
}

// dumpBytes is what one trial's dumps of the task hold on device, where they are files: its
// inputs and its output, measured once per task and device by the clean reference process
// (io_bytes). 0 and false when not known (the reference's forward raised: the trial will say so).
func (e *Evaluator) dumpBytes(ctx context.Context, ref *refServer, t Task, device string) (int64, bool) {
	key := t.Hash + "\x00" + device
	e.mu.Lock()
	n, ok := e.dumps[key]
	e.mu.Unlock()
	if ok {
		return n, n > 0
	}
	rep, err := call(ctx, ref.p, e.opt.Config.CallTimeout, ioBytesRequest{Seed: 0, Dist: "default"})
	if err != nil || rep.InputsBytes < 0 || rep.OutputBytes < 0 {
		n = 0
	} else {
		n = rep.InputsBytes + rep.OutputBytes
	}
	e.mu.Lock()
	e.dumps[key] = n
	e.mu.Unlock()
	return n, n > 0
}

// workRoom is the room one evaluation's candidate needs in the work folder once its folder is
// made and its kernel staged: minWorkRoom, and the task's dumps where tensors travel as files.
type workRoom struct {
	dumps  int64 // one trial's outputs and inputs as files (0: none, or not known)
	known  bool  // dumps was measured (files are written and their size is known)
	files  bool  // tensors travel as files
	staged int64 // what the harness put in the candidate's folder: its kernel file and builds
}

func (w workRoom) need() int64 { return minWorkRoom + w.dumps }

// what says what the need is made of.
func (w workRoom) what() string {
	switch {
	case !w.files:
		return "outputs travel by CUDA IPC, not as files; " + mib(minWorkRoom) + " for the kernel's and the workers' files"
	case !w.known:
		return "the size of the task's outputs is not known (its reference did not run); " + mib(minWorkRoom) + " for the kernel's and the workers' files"
	}
	return fmt.Sprintf("one trial's outputs and inputs as files: %s, and %s for the kernel's and the workers' files", mib(w.dumps), mib(minWorkRoom))
}

// checkRoom is the check before the candidate loads: the work folder has room for the task's
// dumps. "" when it has, or when its room cannot be read.
func (e *Evaluator) checkRoom(w workRoom) string {
	free, err := workFreeBytes(e.opt.WorkDir)
	if err != nil || free >= w.need() {
		return ""
	}
	return roomShort(e.opt.WorkDir, free, w.need(), w.what())
}

// judgeFull decides whether a report that a write found no room, from a process that ran the
// kernel's code in folder dir, is the platform's: true, with the message for the record, when
// the driver's own statfs finds the work folder short of what the evaluation needs and the
// kernel's own files in its folder (beyond what the harness put there: staged, and the dumps
// under out) are within kernelRoom. Otherwise false, with why the claim is the kernel's.
func (e *Evaluator) judgeFull(dir string, w workRoom) (bool, string) {
	free, err := workFreeBytes(e.opt.WorkDir)
	if err != nil {
		return false, fmt.Sprintf("the kernel's process reported a full disk, and the room of the work folder %s cannot be read (%v) to confirm it; counted as the kernel's failure", e.opt.WorkDir, err)
	}
	out := filepath.Join(dir, "out")
	dumped := min(dirBytes(out), w.dumps) // the harness's part of what lies under out
	if free+dumped >= w.need() {
		return false, fmt.Sprintf("the kernel's process reported a full disk, but the work folder %s has %s free, more than the %s this evaluation needs (%s); counted as the kernel's failure",
			e.opt.WorkDir, mib(free), mib(w.need()), w.what())
	}
	own := dirBytes(dir) - w.staged - dumped
	if own > kernelRoom {
		return false, fmt.Sprintf("the work folder %s is full (%s free), and the kernel's own files in its folder take %s of it (a kernel may use %s): the kernel filled it; counted as the kernel's failure",
			e.opt.WorkDir, mib(free), mib(own), mib(kernelRoom))
	}
	return true, fmt.Sprintf("the work folder %s is full: %s free, and this evaluation needs about %s there (%s); the kernel's own files take %s. No verdict about the kernel: %s",
		e.opt.WorkDir, mib(free), mib(w.need()), w.what(), mib(own), folderAdvice(e.opt.WorkDir, workSetting))
}

const cacheSetting = "cache_dir (KBP_CACHE_DIR)"

// judgeCompileFull is judgeFull for a compile, whose temporaries go to its folder under the
// work folder (staged: what the harness put there) and whose builds go to the kernel's build
// folder build under the cache folder.
func (e *Evaluator) judgeCompileFull(dir, build string, staged int64) (bool, string) {
	if free, err := workFreeBytes(e.opt.CacheDir); err == nil && free < minWorkRoom {
		n := dirBytes(build)
		if n > kernelRoom {
			return false, fmt.Sprintf("the cache folder %s is full (%s free), and the kernel's builds take %s of it (a kernel may use %s): the kernel filled it; counted as the kernel's failure",
				e.opt.CacheDir, mib(free), mib(n), mib(kernelRoom))
		}
		return true, fmt.Sprintf("the cache folder %s, which holds the kernels' builds, is full: %s free; the kernel's builds take %s. No verdict about the kernel: %s",
			e.opt.CacheDir, mib(free), mib(n), folderAdvice(e.opt.CacheDir, cacheSetting))
	}
	return e.judgeFull(dir, workRoom{staged: staged})
}
