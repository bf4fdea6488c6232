package contract

import (
	"encoding/json"
	"strings"
	"testing"
)

// The resource check decides, from what the reference's load reported, whether a candidate gets
// room on the device before any candidate code runs.
func TestReferenceFits(t *testing.T) {
	load := func(footprint, free, total int64) *refServer {
		r := &refServer{device: "cuda:0"}
		// The reply as the worker writes it: footprint only where it measured one.
		line := map[string]any{"seq": 2, "ok": true, "memory": map[string]int64{"free": free, "total": total}}
		if footprint > 0 {
			line["footprint"] = footprint
		}
		b, _ := json.Marshal(line)
		var rep loadReply
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatal(err)
		}
		r.noteLoad(rep)
		return r
	}
	const gib = int64(1) << 30
	tests := []struct {
		name      string
		r         *refServer
		fits      bool
		mentioned []string
	}{
		{"cpu: no footprint reported", load(0, 0, 0), true, nil},
		{"plenty free", load(12*gib, 120*gib, 140*gib), true, nil},
		{"exactly twice free", load(10*gib, 20*gib, 140*gib), true, nil},
		{"not twice free", load(50*gib, 80*gib, 140*gib), false, []string{"cuda:0", "50.0 GiB", "100.0 GiB", "80.0 GiB", "140.0 GiB"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msg := tc.r.fits()
			if (msg == "") != tc.fits {
				t.Fatalf("fits() = %q, want fits=%v", msg, tc.fits)
			}
			for _, m := range tc.mentioned {
				if !strings.Contains(msg, m) {
					t.Errorf("message lacks %q: %s", m, msg)
				}
			}
			if !tc.r.measured {
				t.Error("a load that reported was not noted as measured")
			}
		})
	}
}
