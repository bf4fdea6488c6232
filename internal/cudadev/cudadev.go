// Package cudadev names the GPU behind a device name such as cuda:1 on this host, the one way
// every part of kbplatform reads it: the worker's CUDA_VISIBLE_DEVICES, the GPU lock, the
// fingerprint and nvidia-smi's process list must all mean the same GPU.
package cudadev

import (
	"os"
	"strconv"
	"strings"
)

// HostID returns the GPU that device (cuda:N, or cuda for cuda:0) names on this host. cuda:N
// counts within the caller's CUDA_VISIBLE_DEVICES, as in every CUDA program: when it is set, the
// GPU is its N-th entry, an index in PCI bus order (as nvidia-smi and NVML number GPUs; workers
// run with CUDA_DEVICE_ORDER=PCI_BUS_ID) or a GPU-... UUID, both of which nvidia-smi -i and
// CUDA_VISIBLE_DEVICES accept. Unset, empty, or with fewer than N+1 entries, it is N. ok is false
// for a device that is not a CUDA one or whose N is not a number.
//
// Under Slurm without device cgroups, CUDA_VISIBLE_DEVICES=3 is how the job learns its GPU: a
// worker started as cuda:0 must run on GPU 3, not on GPU 0 of another job.
func HostID(device string) (id string, ok bool) {
	rest, ok := strings.CutPrefix(device, "cuda")
	if !ok {
		return "", false
	}
	idx := "0"
	if rest != "" {
		if idx, ok = strings.CutPrefix(rest, ":"); !ok {
			return "", false
		}
	}
	n, err := strconv.Atoi(idx)
	if err != nil || n < 0 {
		return "", false
	}
	if vis := os.Getenv("CUDA_VISIBLE_DEVICES"); strings.TrimSpace(vis) != "" {
		if ids := strings.Split(vis, ","); n < len(ids) {
			if id := strings.TrimSpace(ids[n]); id != "" {
				return id, true
			}
		}
	}
	return strconv.Itoa(n), true
}
