package contract

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	workerfiles "github.com/kbplatform/kbplatform/internal/contract/worker"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/kbplatform/kbplatform/internal/cudadev"
)

// DefaultHostInfo is what the driver reads about the machine itself: the CPU, the kernel and, for
// a GPU, what nvidia-smi reports (driver version and clocks at the start of the evaluation).
func DefaultHostInfo(device string) Fingerprint {
	fp := BaseHostInfo(device)
	if id, ok := cudadev.HostID(device); ok {
		for k, v := range nvidiaSMI(id) {
			fp[k] = v
		}
	}
	return fp
}

// BaseHostInfo is the device-independent half: CPU and kernel.
func BaseHostInfo(device string) Fingerprint {
	fp := Fingerprint{
		"cpu_model": cpuModel(),
		"cpu_count": runtime.NumCPU(),
		"os":        runtime.GOOS + "/" + runtime.GOARCH,
	}
	var u syscall.Utsname
	if syscall.Uname(&u) == nil {
		fp["kernel"] = utsString(u.Release[:])
	}
	return fp
}

func utsString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// nvidiaSMI queries one GPU. Missing nvidia-smi gives an empty map: the worker still reports the
// device name and capability.
func nvidiaSMI(index string) map[string]any {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fields := []string{"name", "uuid", "pci.bus_id", "driver_version", "clocks.sm", "clocks.mem", "clocks.max.sm", "power.limit", "temperature.gpu", "pstate"}
	out, err := exec.CommandContext(ctx, "nvidia-smi", "-i", index, "--query-gpu="+strings.Join(fields, ","), "--format=csv,noheader,nounits").Output()
	if err != nil {
		return nil
	}
	vals := strings.Split(strings.TrimSpace(string(out)), ",")
	if len(vals) != len(fields) {
		return nil
	}
	keys := []string{"gpu_name", "gpu_uuid", "gpu_pci_bus_id", "driver", "sm_clock_mhz", "mem_clock_mhz", "max_sm_clock_mhz", "power_limit_w", "temperature_c", "pstate"}
	m := map[string]any{"gpu_index": index}
	for i, k := range keys {
		m[k] = strings.TrimSpace(vals[i])
	}
	return m
}

// fingerprint merges the worker's view with the host's. Where both name the GPU's UUID and they
// differ, the host described another GPU than the one the evaluation ran on: the record says so
// rather than carry a wrong identity silently.
func (e *Evaluator) fingerprint(device string, worker Fingerprint) Fingerprint {
	fp := Fingerprint{}
	for k, v := range worker {
		fp[k] = v
	}
	for k, v := range e.opt.HostInfo(device) {
		fp[k] = v
	}
	fp["python_path"] = e.opt.Python.Path
	// Which harness judged: the worker's content hash (its files are verified against it before
	// every start).
	fp["worker"] = workerfiles.Version()
	if device != "" {
		// The worker sees its one GPU as cuda:0; the record names the host's device.
		fp["device"] = device
	}
	if w, h := normUUID(worker["device_uuid"]), normUUID(fp["gpu_uuid"]); w != "" && h != "" && w != h {
		fp["gpu_identity"] = fmt.Sprintf("mismatch: the evaluation ran on GPU %s, the host described %s", w, h)
	}
	return fp
}

// normUUID reduces NVML's "GPU-8f3c…" and torch's "8f3c…" to one form: "" when absent or not a
// UUID (a torch whose uuid prints otherwise must not read as another GPU).
func normUUID(v any) string {
	s, _ := v.(string)
	s = strings.ToLower(strings.TrimPrefix(strings.TrimSpace(s), "GPU-"))
	if len(s) < 32 || strings.Trim(s, "0123456789abcdef-") != "" {
		return ""
	}
	return s
}

func hashString(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
