// Package sandbox confines the processes that run code a model wrote: a kernel's build, its
// import, its trials, timed calls and profile. kbplatform runs that code on a researcher's own
// machine, beside their API keys, their database and the harness that decides the verdict, so
// before any of it runs the process gets
//
//   - an environment built from an allowlist (no key, token or provider variable, whatever the
//     caller had);
//   - Landlock: read-only access to the system, the Python installation and the files it is
//     given, read-write access only to its own folders and device files, nothing else (not the
//     database, not the user's home, not other kernels' sources or builds);
//   - no network: Landlock's TCP rules where the kernel has them, and a seccomp filter that
//     refuses inet, packet and named unix sockets everywhere;
//   - a seccomp filter against what a kernel never needs (ptrace, process_vm_*, mount, bpf,
//     kexec, module loading, namespaces, keyrings, perf_event_open outside profiling);
//   - no_new_privs, no capabilities (a root caller's included), no core dumps, bounded
//     processes, open files and file size.
//
// The confinement is applied by the binary itself, re-executed as a helper (Command), which then
// executes the program: nothing of the program runs before all of it holds. What the running
// kernel supports is found once (Probe) and written on every record; a part the kernel lacks is
// left out and said, unless the caller requires the whole (ModeRequire).
package sandbox

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/kbplatform/kbplatform/sdk"
)

// Policy is what one confined process may do.
type Policy struct {
	// Env is the program's whole environment (see Environ).
	Env []string `json:"env"`
	// ReadOnly are folders (with everything below) and files the program may read and execute.
	// Paths that do not exist are skipped.
	ReadOnly []string `json:"read_only,omitempty"`
	// ReadWrite are folders and files the program may read, write, create and remove in.
	ReadWrite []string `json:"read_write,omitempty"`
	// Unlisted are folders the program may create, read, write and remove files in by name, but
	// not list: on a GPU, /dev/shm, where torch keeps the reference counts of CUDA memory it
	// shares between processes. Without a listing, nobody else's file there can be found.
	Unlisted []string `json:"unlisted,omitempty"`
	// Writable are folders whose existing files the program may write, but where it may create
	// or remove nothing: /proc on a GPU, where CUDA's initialisation names its threads
	// (/proc/<pid>/task/<tid>/comm) and fails without it. The worker narrows this to its own
	// /proc entry itself, once it exists (kbpworker/confine.py).
	Writable []string `json:"writable,omitempty"`
	// Devices are device files the program may read, write and send ioctls to (GPUs, /dev/null).
	Devices []string `json:"devices,omitempty"`
	// Profiling allows perf_event_open (a profiler's call), refused otherwise.
	Profiling bool `json:"profiling,omitempty"`
	// MaxTasks bounds the processes and threads the program's user may start beyond those it has
	// when the program starts (RLIMIT_NPROC counts a user's tasks host-wide); 0: DefaultMaxTasks.
	MaxTasks uint64 `json:"max_tasks,omitempty"`
	// MaxOpenFiles bounds the open files of each process; 0: DefaultMaxOpenFiles.
	MaxOpenFiles uint64 `json:"max_open_files,omitempty"`
	// MaxFileBytes bounds the size of any file the program writes; 0: DefaultMaxFileBytes.
	MaxFileBytes uint64 `json:"max_file_bytes,omitempty"`
	// Mode is how much of the sandbox the caller insists on (default ModeBestEffort).
	Mode Mode `json:"mode,omitempty"`
	// Without are layers left out, for diagnosis only (kbplatform sandbox run --without): to find
	// which layer a program that fails confined trips over. The contract never sets it.
	Without []Layer `json:"without,omitempty"`
}

// Layer is one part of the sandbox that Policy.Without can leave out.
type Layer string

const (
	LayerLandlock     Layer = "landlock"     // the filesystem, network and signal rules
	LayerSeccomp      Layer = "seccomp"      // the system-call filter
	LayerCapabilities Layer = "capabilities" // dropping every capability
	LayerLimits       Layer = "limits"       // the resource limits and the pids cgroup
)

// Layers are the layers a Policy can leave out, in the order the helper applies them.
var Layers = []Layer{LayerLimits, LayerLandlock, LayerSeccomp, LayerCapabilities}

// ParseLayer reads a layer's name.
func ParseLayer(s string) (Layer, error) {
	for _, l := range Layers {
		if string(l) == s {
			return l, nil
		}
	}
	return "", fmt.Errorf("sandbox layer %q: want one of %v", s, Layers)
}

func (p Policy) without(l Layer) bool { return slices.Contains(p.Without, l) }

// GrantGPU adds what CUDA needs beyond the GPUs' device files, which a program that initialises
// CUDA fails without (error 304, "OS call failed"):
//   - /dev/shm, files by name but no listing: torch's CUDA IPC keeps each shared block's reference
//     count in a POSIX shared-memory file (/dev/shm/torch_<pid>_<random>_<n>) that one process
//     makes and another opens; folders there have unguessable names, so without a listing nobody
//     else's file can be found;
//   - writing existing files under /proc: CUDA's initialisation names its threads through
//     /proc/<pid>/task/<tid>/comm. A worker narrows this to its own entry once it runs
//     (kbpworker/confine.py).
func (p *Policy) GrantGPU() {
	p.Unlisted = append(p.Unlisted, "/dev/shm")
	p.Writable = append(p.Writable, "/proc")
}

// Mode says how much of the sandbox a caller insists on.
type Mode string

const (
	// ModeBestEffort applies every part this host supports and says what is missing.
	ModeBestEffort Mode = "best-effort"
	// ModeRequire refuses to start a program where a part cannot be applied.
	ModeRequire Mode = "require"
	// ModeOff applies the environment allowlist alone: for a host where the sandbox keeps honest
	// kernels from running, until that is fixed. Every record says so.
	ModeOff Mode = "off"
)

// ParseMode reads a setting's value ("" is best-effort).
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case "":
		return ModeBestEffort, nil
	case ModeBestEffort, ModeRequire, ModeOff:
		return m, nil
	}
	return "", fmt.Errorf("sandbox %q: want best-effort (apply what the host supports and say what is missing), require (refuse to run a kernel without the whole sandbox) or off (the environment allowlist alone)", s)
}

// StatusFor is what a sandbox in mode m holds on this host, for the record.
func StatusFor(m Mode) Status {
	if m == ModeOff {
		return Status{Network: "open", Env: "allowlist", Missing: []string{"off: the settings turned the sandbox off (sandbox: off); only the environment allowlist held"}}
	}
	return Probe()
}

// Defaults of a Policy's bounds. A kernel's build starts a compiler per core and torch a thread
// per core; 1024 tasks is far above both and far below what would hurt the host.
const (
	DefaultMaxTasks     = 1024
	DefaultMaxOpenFiles = 4096
	DefaultMaxFileBytes = 16 << 30
)

// Status says what a sandbox holds on this host: the parts of a Policy the running kernel can
// apply. It is written on every record the contract makes.
type Status = sdk.Sandbox

// SystemPaths are the folders of the host's programs, libraries and settings, which a confined
// Python and its compilers read (missing ones are skipped).
var SystemPaths = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/proc", "/sys"}

// deviceFiles are the device files every confined program may use; gpuDeviceGlobs add the GPUs'.
var (
	deviceFiles    = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"}
	gpuDeviceGlobs = []string{"/dev/nvidia*", "/dev/nvidia-caps/*", "/dev/dri/*"}
)

// DeviceFiles lists the device files a confined program may use on this host: /dev/null and its
// kind, and every GPU's.
func DeviceFiles() []string {
	devs := append([]string(nil), deviceFiles...)
	for _, g := range gpuDeviceGlobs {
		m, _ := filepath.Glob(g)
		devs = append(devs, m...)
	}
	return devs
}
