package plugintest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/sdk"
)

// PromptHardware is the target RunPromptGoldens shows to hardware-aware prompts: a CPU and one GPU
// with every optional fingerprint field, so that the goldens show each line a target can fill.
var PromptHardware = &sdk.Hardware{
	Target: "plugintest",
	Devices: []sdk.Device{
		{Name: "cpu", Kind: "cpu", Model: "Example CPU @ 3.0GHz"},
		{Name: "cuda:0", Kind: "cuda", Model: "NVIDIA H200", MemoryBytes: 150 << 30, ComputeCapability: "9.0", Multiprocessors: 132},
	},
	Fingerprint: sdk.Fingerprint{"cpu_count": 16, "cpu_threads": 1, "memory_bandwidth_gbs": 4800,
		"shared_memory_per_block": 232448, "tensor_core_dtypes": []any{"fp16", "bf16", "tf32", "fp8", "int8"}},
}

// RunPromptGoldens renders the backend's prompt for SampleTask in every variant it declares and
// compares each with dir/<variant>.golden; update rewrites the files instead (wire it to an
// -update test flag).
func RunPromptGoldens(t *testing.T, impl sdk.Backend, config json.RawMessage, dir string, update bool) {
	r := Connect(t, impl)
	ctx := context.Background()
	if err := r.Configure(ctx, config, nil); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	for _, v := range declaredVariants(r.Info()) {
		t.Run(v, func(t *testing.T) {
			msgs, err := r.Backend().Prompt(ctx, sdk.PromptRequest{Task: SampleTask, Variant: v, Hardware: PromptHardware})
			if err != nil {
				t.Fatalf("Prompt: %v", err)
			}
			var b strings.Builder
			for _, m := range msgs {
				b.WriteString("=== " + m.Role + "\n" + m.Content)
				if !strings.HasSuffix(m.Content, "\n") {
					b.WriteString("\n")
				}
			}
			got := b.String()
			path := filepath.Join(dir, v+".golden")
			if update {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run the test with -update to write it)", err)
			}
			if got != string(want) {
				t.Errorf("prompt %s differs from %s (rerun with -update if the change is meant):\n%s", v, path, firstDiff(got, string(want)))
			}
		})
	}
}

func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return "line " + strconv.Itoa(i+1) + ":\n  got:  " + gl + "\n  want: " + wl
		}
	}
	return ""
}
