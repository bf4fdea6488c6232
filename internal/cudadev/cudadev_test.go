package cudadev

import "testing"

func TestHostID(t *testing.T) {
	for _, tc := range []struct {
		vis, device, want string
		ok                bool
	}{
		{"", "cuda:3", "3", true},
		{"", "cuda", "0", true},
		{"5,7", "cuda:0", "5", true},
		{"5,7", "cuda:1", "7", true},
		{"5, GPU-1a2b", "cuda:1", "GPU-1a2b", true},
		{"5,7", "cuda:2", "2", true}, // beyond the list: no GPU torch would see, taken as is
		{" ", "cuda:1", "1", true},
		{"", "cpu", "", false},
		{"", "cuda:x", "", false},
		{"", "cuda1", "", false},
		{"", "cuda:-1", "", false},
	} {
		t.Setenv("CUDA_VISIBLE_DEVICES", tc.vis)
		got, ok := HostID(tc.device)
		if got != tc.want || ok != tc.ok {
			t.Errorf("CUDA_VISIBLE_DEVICES=%q %s: %q %v, want %q %v", tc.vis, tc.device, got, ok, tc.want, tc.ok)
		}
	}
}
