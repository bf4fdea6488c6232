package contract

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/kbplatform/kbplatform/internal/contract/worker"
	"github.com/kbplatform/kbplatform/internal/sandbox"
)

// Every worker process runs in the sandbox (internal/sandbox): a candidate's, whose code a model
// wrote, and a reference's, which keeps the trusted side's rights and nothing more. What each may
// touch:
//
//   - read: the system (/usr, /etc, /proc, /sys, ...), the Python installation the interpreter
//     reported, the CUDA toolkit and a backend's include paths, the extracted worker, the
//     rendered tasks; a reference also reads the evaluations' folders (the candidate's output
//     dumps);
//   - write: its own folder, which is also its HOME, TMPDIR and every cache its libraries keep
//     (Triton, torch extensions, inductor); a compile also writes its kernel's build folder;
//   - devices: /dev/null and its kind, and the GPUs' device files.
//
// Builds are kept per kernel (buildDir): a compile writes only the builds of the source it
// compiles, and an evaluation's process gets a copy of them in its own folder (stageBuilds), so
// no kernel reads or changes another's build, and a spare process, started before its kernel is
// known, needs no rights on any build.

// toolkitVars name folders a worker reads when they are set (the CUDA toolkit, CUTLASS).
var toolkitVars = []string{"CUDA_HOME", "CUDA_PATH", "CUTLASS_PATH"}

// workerPolicy is the sandbox of one worker process of role running in dir, with env the
// variables the harness sets (device, channels, recipe). build, when set, is the kernel build
// folder a compile writes.
func (e *Evaluator) workerPolicy(role, device, dir, build string, env []string) sandbox.Policy {
	ro := append([]string(nil), sandbox.SystemPaths...)
	ro = append(ro, e.opt.Python.Paths...)
	ro = append(ro, filepath.Dir(e.opt.Python.Path), filepath.Dir(e.script), filepath.Join(e.opt.WorkDir, "tasks"))
	for _, v := range toolkitVars {
		if p := os.Getenv(v); p != "" {
			ro = append(ro, p)
		}
	}
	if r := e.opt.Recipe; r != nil && role == "candidate" {
		ro = append(ro, r.IncludePaths...)
		for _, v := range toolkitVars {
			if p := r.Env[v]; p != "" {
				ro = append(ro, p)
			}
		}
	}
	if role == "reference" {
		ro = append(ro, e.opt.WorkDir) // the candidates' output dumps
	}
	rw := []string{dir}
	if build != "" {
		rw = append(rw, build)
	}
	devs := sandbox.DeviceFiles()
	// The process's own folder holds everything its libraries would keep in the user's home or
	// in shared caches: a kernel cannot read or seed another's.
	set := append([]string(nil), env...)
	set = append(set, "KBP_WRITABLE="+strings.Join(rw, string(os.PathListSeparator)),
		"HOME="+dir, "TMPDIR="+filepath.Join(dir, "tmp"), "XDG_CACHE_HOME="+filepath.Join(dir, ".cache"),
		"TRITON_HOME="+dir, "TRITON_CACHE_DIR="+filepath.Join(dir, "triton"),
		"TORCH_EXTENSIONS_DIR="+filepath.Join(dir, "torch_extensions"),
		"TORCHINDUCTOR_CACHE_DIR="+filepath.Join(dir, "inductor"),
	)
	p := sandbox.Policy{Env: sandbox.Environ(os.Environ(), set), ReadOnly: ro, ReadWrite: rw, Devices: devs, Mode: e.opt.Sandbox}
	if strings.HasPrefix(device, "cuda") {
		p.GrantGPU()
	}
	return p
}

// privateDir makes a folder for one process under parent, named prefix, this driver's pid and 128
// random bits: on a GPU a worker may open files by name under /dev/shm, where the work folder
// usually is, and a folder it cannot list must also be one whose name it cannot guess
// (os.MkdirTemp's 32 bits can be tried through within a time limit). The pid says whose it is,
// for sweepWorkDir.
func privateDir(parent, prefix string) (string, error) {
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return "", err
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	dir := filepath.Join(parent, fmt.Sprintf("%s%d-%s", prefix, os.Getpid(), hex.EncodeToString(b)))
	return dir, os.Mkdir(dir, 0o700)
}

// workDirPrefixes are the folders privateDir makes.
var workDirPrefixes = []string{"eval-", "ref-", "compile-"}

// sweepWorkDir removes the folders under dir that privateDir made for a driver that no longer
// runs: a target plugin killed with its evaluations in flight left their dumps and builds behind
// (gigabytes at GPU sizes, on a tmpfs). A folder whose driver's pid was reused since stays.
func sweepWorkDir(dir string) (removed int) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		for _, p := range workDirPrefixes {
			rest, ok := strings.CutPrefix(e.Name(), p)
			if !ok || !e.IsDir() {
				continue
			}
			pidText, _, _ := strings.Cut(rest, "-")
			pid, err := strconv.Atoi(pidText)
			if err != nil || pid <= 0 || processAlive(pid) {
				continue
			}
			if os.RemoveAll(filepath.Join(dir, e.Name())) == nil {
				removed++
			}
		}
	}
	return removed
}

// processAlive says whether pid is a live process, another user's included. A zombie is not: a
// driver killed with the command that started it stays one until something reaps it, and its
// folders are as dead as it is.
func processAlive(pid int) bool {
	st, ok := readStatBuf(pid, make([]byte, 512))
	return ok && st.state != 'Z' && st.state != 'X'
}

// buildDir is the build folder of kernel k's extensions on device, under the cache: one per
// source and build settings (interpreter, device kind, architecture, a backend's flags), so that
// only the same source's compiles and evaluations ever use it.
func (e *Evaluator) buildDir(k Kernel, device string) string {
	kind := "cpu"
	if strings.HasPrefix(device, "cuda") {
		kind = "cuda"
	}
	recipe, _ := json.Marshal(e.opt.Recipe)
	h := sha256.New()
	for _, part := range []string{k.Source, e.opt.Python.Path, e.opt.Python.Torch, kind, e.opt.Python.Capability, string(recipe)} {
		fmt.Fprintf(h, "%d:%s", len(part), part)
	}
	return filepath.Join(e.opt.CacheDir, "kernels", hex.EncodeToString(h.Sum(nil))[:32])
}

// maxStagedBytes bounds what stageBuilds copies: a kernel's extensions are megabytes; a build
// folder far larger was filled on purpose.
const maxStagedBytes = 2 << 30

// stageBuilds copies the finished builds of a kernel (each build's "ok" marker and its shared
// objects) from its build folder's ext/ into an evaluation's ext folder, where the evaluation's
// process finds them as cache hits. The build folder was written by the kernel's own compile, so
// only regular files are copied: a link planted there would have the driver read a file of the
// user's into the candidate's folder. A kernel with nothing built yet (it was compiled in another
// process, or builds nothing) is built again in the evaluation's own folder.
func stageBuilds(from, to string) error {
	keys, err := os.ReadDir(from)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	var total int64
	for _, key := range keys {
		if !key.IsDir() {
			continue
		}
		files, err := os.ReadDir(filepath.Join(from, key.Name()))
		if err != nil {
			return err
		}
		for _, f := range files {
			name := f.Name()
			if !f.Type().IsRegular() || (name != "ok" && !strings.HasSuffix(name, ".so")) {
				continue
			}
			n, err := copyRegular(filepath.Join(from, key.Name(), name), filepath.Join(to, key.Name(), name), maxStagedBytes-total)
			if err != nil {
				return err
			}
			total += n
		}
	}
	return nil
}

// copyRegular copies one regular file (never through a link) of at most limit bytes.
func copyRegular(src, dst string, limit int64) (int64, error) {
	in, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	if st, err := in.Stat(); err != nil || !st.Mode().IsRegular() {
		return 0, fmt.Errorf("%s is not a regular file", src)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return 0, err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o700)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, io.LimitReader(in, limit+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > limit {
		err = fmt.Errorf("the kernel's builds exceed %d bytes", int64(maxStagedBytes))
	}
	return n, err
}

// verifyWorker checks the extracted worker against the embedded one before a process starts
// from it, every time: a marker file said only that an extraction once finished, and a kernel (or
// anything else) that rewrote the comparison code there decided every later verdict. A changed
// worker is written again, and said.
func (e *Evaluator) verifyWorker() error {
	e.workerMu.Lock()
	defer e.workerMu.Unlock()
	root := filepath.Dir(e.script)
	if worker.Verify(root) == nil {
		return nil
	}
	if _, err := worker.Extract(filepath.Dir(root)); err != nil {
		if !errors.Is(err, worker.ErrReplaced) {
			return fmt.Errorf("%w: extract worker: %v", ErrHarness, err)
		}
		e.progress("warning: %v", err)
	}
	return nil
}

// sandboxStatus is what confines this host's workers, for the record; the first evaluation says
// once what is missing.
func (e *Evaluator) sandboxStatus() *Sandbox {
	st := sandbox.StatusFor(e.opt.Sandbox)
	if len(st.Missing) > 0 {
		e.sandboxNotice.Do(func() {
			e.progress("warning: the sandbox is incomplete on this host (%s): %s", st, strings.Join(st.Missing, "; "))
		})
	}
	st.Missing = append([]string(nil), st.Missing...)
	return &st
}

// cudaStartFailures are what CUDA says when its initialisation was denied something: the
// sandbox's doing where a host needs a path or call the sandbox does not grant.
var cudaStartFailures = []string{"operation not supported on this os", "os call failed", "cudaerroroperatingsystem", "error 304", "cuda driver initialization failed"}

// sandboxStopsCUDA says, when a kernel's process failed with candText on device, whether the
// reference's start failed the same way: CUDA did not start in the sandbox in a process that runs
// no kernel code either, so the host's sandbox is at fault, not the kernel (on a host whose driver
// needs something the sandbox denies, every kernel would fail its compile otherwise, each blamed
// on the kernel). It returns the message to record then. It waits for the reference's start.
func (e *Evaluator) sandboxStopsCUDA(device, candText string, ref *pendingRef) (string, bool) {
	if e.cudaStartHint(device, candText) == "" {
		return "", false
	}
	_, err := ref.wait()
	if err == nil {
		return "", false // CUDA starts for the reference: the kernel's own doing
	}
	text := err.Error()
	var rf *refFailure
	if errors.As(err, &rf) {
		text += "\n" + rf.log
	}
	hint := e.cudaStartHint(device, text)
	if hint == "" {
		return "", false
	}
	return "CUDA did not start in the sandbox, in the kernel's process nor in the reference's, which runs no kernel code: the sandbox denies something this host's driver needs. The kernel's process said: " + firstLineOf(candText) + hint, true
}

// firstLineOf is the first line of s.
func firstLineOf(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// cudaStartHint is what a worker that could not start CUDA in the sandbox adds to its message:
// how to see it for oneself, and the way to evaluate meanwhile.
func (e *Evaluator) cudaStartHint(device, text string) string {
	if !strings.HasPrefix(device, "cuda") || e.opt.Sandbox == sandbox.ModeOff {
		return ""
	}
	t := strings.ToLower(text)
	for _, f := range cudaStartFailures {
		if strings.Contains(t, f) {
			return "\n(CUDA could not start inside the sandbox, which may deny something this host's driver needs: " +
				"kbplatform sandbox run -- python3 -c 'import torch; torch.zeros(1, device=\"cuda\")' shows it; " +
				"sandbox: off in kbplatform.yaml evaluates without it meanwhile, said on every record; docs/contract.md, \"Sandbox\")"
		}
	}
	return ""
}
