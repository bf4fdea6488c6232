package queue

import "testing"

func TestGPUKind(t *testing.T) {
	for _, c := range []struct{ name, want string }{
		{"NVIDIA H200", "h200"},
		{"NVIDIA H100 80GB HBM3", "h100"},
		{"NVIDIA H100 PCIe", "h100"},
		{"Tesla V100-SXM2-32GB", "v100"},
		{"NVIDIA GeForce RTX 2080 Ti", "2080ti"},
		{"NVIDIA L40S", "l40s"},
		{"NVIDIA A100-SXM4-80GB", "a100"},
		{"NVIDIA RTX A6000", "a6000"},
		{"NVIDIA GH200 480GB", "gh200"},
		{"", "gpu"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := GPUKind(c.name)
			if got != c.want {
				t.Errorf("GPUKind(%q) = %q, want %q", c.name, got, c.want)
			}
			if err := ValidKind(got); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestKindOf(t *testing.T) {
	for _, c := range []struct {
		device, want string
		bad          bool
	}{
		{"cpu", "cpu", false},
		{"cuda:h200", "h200", false},
		{"l40s", "l40s", false},
		{"cuda", "", true},
		{"cuda:0", "", true},
		{"cuda:H200", "", true},
		{"cuda:h 200", "", true},
	} {
		got, err := KindOf(c.device)
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("KindOf(%q) = %q, %v; want %q (error: %v)", c.device, got, err, c.want, c.bad)
		}
		if !c.bad && DeviceOf(got) != c.device && c.device != "l40s" {
			t.Errorf("DeviceOf(%q) = %q, want %q", got, DeviceOf(got), c.device)
		}
	}
}
