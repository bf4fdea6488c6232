package kernellang

import (
	"slices"
	"testing"

	"github.com/kbplatform/kbplatform/sdk"
)

// The hardware-aware prompt shows what the target reported and nothing it did not.
func TestHardwareFacts(t *testing.T) {
	cases := []struct {
		name string
		hw   *sdk.Hardware
		kind string
		want []string
	}{
		{"no hardware", nil, "cuda", nil},
		{"a GPU backend on a CPU-only target", &sdk.Hardware{Devices: []sdk.Device{{Name: "cpu", Kind: "cpu", Model: "Xeon"}}}, "cuda", nil},
		{"a GPU with only its name", &sdk.Hardware{Devices: []sdk.Device{{Name: "cuda:0", Kind: "cuda", Model: "NVIDIA H200"}}}, "cuda",
			[]string{"GPU cuda:0: NVIDIA H200"}},
		{"what the local target reports today", &sdk.Hardware{Devices: []sdk.Device{{Name: "cuda:0", Kind: "cuda", Model: "NVIDIA H200",
			MemoryBytes: 143 << 30, ComputeCapability: "9.0", Multiprocessors: 132}}, Fingerprint: sdk.Fingerprint{"cpu_count": 16}}, "cuda",
			[]string{"GPU cuda:0: NVIDIA H200, compute capability 9.0, 132 streaming multiprocessors, 143 GiB of device memory"}},
		{"optional fields when reported", &sdk.Hardware{Devices: []sdk.Device{{Name: "cuda:0", Kind: "cuda", Model: "G"}},
			Fingerprint: sdk.Fingerprint{KeyMemoryBandwidth: 3350, KeyTensorCoreDtypes: []string{"fp16", "bf16"}}}, "cuda",
			[]string{"GPU cuda:0: G", "memory bandwidth 3350 GB/s", "tensor cores for fp16, bf16"}},
		{"a CPU", &sdk.Hardware{Devices: []sdk.Device{{Name: "cpu", Kind: "cpu", Model: "Xeon"}, {Name: "cuda:0", Kind: "cuda"}},
			Fingerprint: sdk.Fingerprint{"cpu_count": 2, "cpu_threads": 1}}, "cpu",
			[]string{"CPU: Xeon", "2 logical cores", "the evaluation runs with 1 thread(s)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := HardwareFacts(c.hw, c.kind); !slices.Equal(got, c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

// TORCH_CUDA_ARCH_LIST covers every GPU kind the target reported, once each, in order.
func TestCUDAArchList(t *testing.T) {
	cases := []struct {
		name string
		hw   *sdk.Hardware
		want string
	}{
		{"no hardware", nil, ""},
		{"cpu only", &sdk.Hardware{Devices: []sdk.Device{{Name: "cpu", Kind: "cpu"}}}, ""},
		{"one GPU", &sdk.Hardware{Devices: []sdk.Device{{Kind: "cuda", ComputeCapability: "9.0"}}}, "9.0"},
		{"two kinds of GPU", &sdk.Hardware{Devices: []sdk.Device{{Kind: "cuda", ComputeCapability: "9.0"},
			{Kind: "cuda", ComputeCapability: "8.0"}, {Kind: "cuda", ComputeCapability: "9.0"}}}, "8.0;9.0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := CUDAArchList(c.hw); got != c.want {
				t.Errorf("CUDAArchList = %q, want %q", got, c.want)
			}
		})
	}
}
