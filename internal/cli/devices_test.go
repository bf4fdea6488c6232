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

// A --device that names no device is a usage error (exit 1) before anything starts; one that is
// well formed but missing stays the platform's (exit 4, TestPickDevices and friends).
func TestDeviceSettingIsChecked(t *testing.T) {
	for spec, ok := range map[string]bool{
		"": true, "auto": true, "all": true, "cpu": true, "cuda": true, "cuda:0": true, "cuda:0,cuda:2": true, "cuda:h200": true,
		"banana": false, "cuda:": false, "gpu:0": false, "cpu,banana": false, "cuda:0;rm": false,
	} {
		if err := checkDeviceSetting(spec); (err == nil) != ok {
			t.Errorf("%q: got %v, want ok=%v", spec, err, ok)
		}
	}
	_, errOut, code := run(t, isolated(t), "eval", "--task", "kbp/l1/relu", "--kernel", "x.py", "--device", "banana")
	if code != 1 || !strings.Contains(errOut, "is not a device") {
		t.Errorf("--device banana: exit %d, %q; want 1 and a usage error", code, errOut)
	}
}
