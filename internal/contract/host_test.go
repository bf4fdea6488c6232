package contract

import (
	"slices"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/internal/pyenv"
)

// A GPU evaluation's worker sees only its GPU, numbered as NVML numbers it, so that the host's
// half of the fingerprint describes the same GPU.
func TestDeviceEnvPCIOrder(t *testing.T) {
	t.Setenv("CUDA_VISIBLE_DEVICES", "")
	dev, env, err := deviceEnv("cuda:3")
	if err != nil || dev != "cuda:0" {
		t.Fatalf("deviceEnv(cuda:3) = %s, %v", dev, err)
	}
	for _, want := range []string{"CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=3"} {
		if !slices.Contains(env, want) {
			t.Errorf("env %v lacks %s", env, want)
		}
	}
	if _, _, err := deviceEnv("cuda:x"); err == nil {
		t.Error("cuda:x accepted")
	}
}

// cuda:N counts within the caller's CUDA_VISIBLE_DEVICES, as it does for torch, the GPU lock and
// the device list: under CUDA_VISIBLE_DEVICES=3 (a Slurm job's GPU), cuda:0 is GPU 3 and the
// worker must be given GPU 3, not GPU 0.
func TestDeviceEnvWithinVisibleDevices(t *testing.T) {
	for vis, want := range map[string]string{"3": "CUDA_VISIBLE_DEVICES=3", "GPU-8f3c0000-1111, 5": "CUDA_VISIBLE_DEVICES=GPU-8f3c0000-1111"} {
		t.Setenv("CUDA_VISIBLE_DEVICES", vis)
		_, env, err := deviceEnv("cuda:0")
		if err != nil || !slices.Contains(env, want) {
			t.Errorf("CUDA_VISIBLE_DEVICES=%s, cuda:0: env %v (%v), want %s", vis, env, err, want)
		}
	}
	t.Setenv("CUDA_VISIBLE_DEVICES", "5,7")
	if _, env, _ := deviceEnv("cuda:1"); !slices.Contains(env, "CUDA_VISIBLE_DEVICES=7") {
		t.Errorf("CUDA_VISIBLE_DEVICES=5,7, cuda:1: env %v, want GPU 7", env)
	}
}

// The record names its own GPU; where the worker's and the host's GPU differ, it says so.
func TestFingerprintGPUIdentity(t *testing.T) {
	host := func(string) Fingerprint {
		return Fingerprint{"gpu_name": "NVIDIA H200", "gpu_uuid": "GPU-8F3C0000-1111-2222-3333-444455556666", "gpu_index": "3"}
	}
	e := &Evaluator{opt: Options{HostInfo: host, Python: &pyenv.Python{Path: "/usr/bin/python3"}}}
	for _, tc := range []struct {
		name, worker string
		mismatch     bool
	}{
		{"same GPU in torch's form", "8f3c0000-1111-2222-3333-444455556666", false},
		{"a uuid printed otherwise", "<CUuuid object>", false},
		{"no uuid from an old torch", "", false},
		{"another GPU", "aaaa0000-2222-2222-3333-444455556666", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := Fingerprint{"device_name": "NVIDIA H200", "device": "cuda:0"}
			if tc.worker != "" {
				w["device_uuid"] = tc.worker
			}
			fp := e.fingerprint("cuda:3", w)
			got, _ := fp["gpu_identity"].(string)
			if (got != "") != tc.mismatch || (tc.mismatch && !strings.Contains(got, "aaaa0000-2222-2222-3333-444455556666")) {
				t.Fatalf("gpu_identity %q, want mismatch %v", got, tc.mismatch)
			}
			if fp["gpu_uuid"] != "GPU-8F3C0000-1111-2222-3333-444455556666" || fp["gpu_index"] != "3" || fp["device"] != "cuda:3" {
				t.Fatalf("fingerprint lost the host's GPU identity: %v", fp)
			}
		})
	}
}
