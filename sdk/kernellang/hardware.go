package kernellang

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kbplatform/kbplatform/sdk"
)

// Optional fingerprint keys a target may report beyond sdk.Device; each is shown when present and
// never guessed when absent.
const (
	KeyMemoryBandwidth  = "memory_bandwidth_gbs"    // GB/s
	KeySharedPerBlock   = "shared_memory_per_block" // bytes (opt-in maximum where it differs)
	KeyL2Cache          = "l2_cache_bytes"
	KeyTensorCoreDtypes = "tensor_core_dtypes" // e.g. ["fp16", "bf16", "tf32", "fp8"]
)

// HardwareFacts are the lines a hardware-aware prompt shows for the devices of one kind (cuda or
// cpu), from what the target reported and nothing else.
func HardwareFacts(hw *sdk.Hardware, kind string) []string {
	if hw == nil {
		return nil
	}
	var out []string
	fp := hw.Fingerprint
	for _, d := range hw.Devices {
		if d.Kind != kind {
			continue
		}
		if kind == "cpu" {
			if d.Model != "" {
				out = append(out, "CPU: "+d.Model)
			}
			continue
		}
		name := d.Model
		if name == "" {
			name = d.Name
		}
		line := fmt.Sprintf("GPU %s: %s", d.Name, name)
		if d.ComputeCapability != "" {
			line += ", compute capability " + d.ComputeCapability
		}
		if d.Multiprocessors > 0 {
			line += fmt.Sprintf(", %d streaming multiprocessors", d.Multiprocessors)
		}
		if d.MemoryBytes > 0 {
			line += fmt.Sprintf(", %.0f GiB of device memory", float64(d.MemoryBytes)/(1<<30))
		}
		out = append(out, line)
	}
	if kind == "cpu" {
		if n, ok := fp["cpu_count"]; ok {
			out = append(out, fmt.Sprintf("%v logical cores", n))
		}
		if n, ok := fp["cpu_threads"]; ok {
			out = append(out, fmt.Sprintf("the evaluation runs with %v thread(s)", n))
		}
		return out
	}
	if len(out) == 0 {
		return nil
	}
	if v, ok := fp[KeyMemoryBandwidth]; ok {
		out = append(out, fmt.Sprintf("memory bandwidth %v GB/s", v))
	}
	if v, ok := fp[KeySharedPerBlock]; ok {
		out = append(out, fmt.Sprintf("up to %v bytes of shared memory per block", v))
	}
	if v, ok := fp[KeyL2Cache]; ok {
		out = append(out, fmt.Sprintf("L2 cache %v bytes", v))
	}
	if v, ok := fp[KeyTensorCoreDtypes]; ok {
		out = append(out, "tensor cores for "+joinAny(v))
	}
	return out
}

func joinAny(v any) string {
	switch x := v.(type) {
	case []string:
		return strings.Join(x, ", ")
	case []any:
		parts := make([]string, len(x))
		for i, p := range x {
			parts[i] = fmt.Sprint(p)
		}
		return strings.Join(parts, ", ")
	}
	return fmt.Sprint(v)
}

// CUDAArchList is TORCH_CUDA_ARCH_LIST for the target's GPUs ("9.0", "8.0;9.0"), from the compute
// capabilities the target reported; empty when it reported none (the worker then uses its own
// device's).
func CUDAArchList(hw *sdk.Hardware) string {
	if hw == nil {
		return ""
	}
	var archs []string
	for _, d := range hw.Devices {
		if d.Kind == "cuda" && d.ComputeCapability != "" && !slices.Contains(archs, d.ComputeCapability) {
			archs = append(archs, d.ComputeCapability)
		}
	}
	slices.Sort(archs)
	return strings.Join(archs, ";")
}
