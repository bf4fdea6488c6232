package cli

import (
	"slices"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/sdk"
)

func TestDeviceList(t *testing.T) {
	gpuHost := &sdk.Hardware{Devices: []sdk.Device{{Name: "cpu", Kind: "cpu"}, {Name: "cuda:0", Kind: "cuda"},
		{Name: "cuda:1", Kind: "cuda"}, {Name: "cuda:2", Kind: "cuda"}}}
	cpuHost := &sdk.Hardware{Devices: []sdk.Device{{Name: "cpu", Kind: "cpu"}}}
	for _, tc := range []struct {
		name, spec string
		hw         *sdk.Hardware
		want       []string
		err        string
	}{
		{"all GPUs", "all", gpuHost, []string{"cuda:0", "cuda:1", "cuda:2"}, ""},
		{"all on a CPU host", "all", cpuHost, []string{"cpu"}, ""},
		{"list", "cuda:0, cuda:2", gpuHost, []string{"cuda:0", "cuda:2"}, ""},
		{"unknown names what the target has", "cuda:0,cuda:7", gpuHost, nil, "no device cuda:7 (it has: cpu, cuda:0, cuda:1, cuda:2)"},
		{"twice", "cuda:1,cuda:1", gpuHost, nil, "given twice"},
		{"empty", "cuda:1,", gpuHost, nil, "empty device"},
		{"cpu with a GPU", "cpu,cuda:0", gpuHost, nil, "cpu cannot be combined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := deviceList(tc.spec, tc.hw)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("deviceList(%q) = %v, %v; want error with %q", tc.spec, got, err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("deviceList(%q) = %v, %v; want %v", tc.spec, got, err, tc.want)
			}
		})
	}
}
