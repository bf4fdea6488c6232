package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/internal/metrics"
	"github.com/kbplatform/kbplatform/internal/report/reporttest"
	"github.com/kbplatform/kbplatform/internal/store"
	"github.com/kbplatform/kbplatform/sdk"
)

func TestCompare(t *testing.T) {
	st := reporttest.Open(t)
	reporttest.Put(t, st, "studyaaaaaaaaaaaaaaa", "cpu run", reporttest.CPUA, false, reporttest.StudyA())
	reporttest.Put(t, st, "studybbbbbbbbbbbbbbb", "gpu rerun", reporttest.GPUB, true, reporttest.StudyB())
	a, err := Load(st, "studyaaa", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Load(st, "studybbb", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compare([]*Study{a}, metrics.Options{}); err == nil || !strings.Contains(err.Error(), "one machine") {
		t.Errorf("one study on one machine: got %v", err)
	}
	c, err := Compare([]*Study{a, b}, metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	flips := map[string]string{}
	for _, k := range c.Kernels {
		flips[k.Kernel] = k.Flip
	}
	want := map[string]string{
		reporttest.ReluFast: "speedup", reporttest.ReluWrong: "", reporttest.SoftmaxDel: "speedup",
		reporttest.SoftmaxFast: "", reporttest.ConvFast: "verdict", reporttest.GemmBroken: "",
		reporttest.MLPKernel: "", // no verdict on A: nothing to compare
	}
	for k, f := range want {
		if flips[k] != f {
			t.Errorf("kernel %s: flip %q, want %q", k[:4], flips[k], f)
		}
	}
	// relu: 3/4 correct on A; on B relu 0.9x, softmax 2.5x, mlp 1.05x pass, conv fails: fast_1 2/5.
	if got := c.Summary[1].Fast1; got.Value != 0.4 || got.N != 5 {
		t.Errorf("fast_1 on B: got %+v", got)
	}
	// softmax's fastest correct kernel is SoftmaxFast on both sides; none changes.
	if len(c.BestChanges) != 0 {
		t.Errorf("best changes: %v", c.BestChanges)
	}
	var buf bytes.Buffer
	if err := c.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	golden(t, "compare.txt", buf.Bytes())

	// One study that ran on both machines splits by hardware.
	both := &Study{ID: "mixed", Attempts: append(append([]Attempt(nil), a.Attempts...), b.Attempts...)}
	c2, err := Compare([]*Study{both}, metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c2.Sides) != 2 || c2.Sides[0].Hardware != "Test CPU A, torch 2.11.0" || c2.Sides[1].Hardware != "Test GPU B, torch 2.11.0" {
		t.Errorf("sides of one study: %+v", c2.Sides)
	}
}

// A host of mixed GPUs: two GPUs of one model are one hardware (their index, UUID and clocks
// differ), two models are two, and the study's report says it pools them.
func TestMixedHostHardware(t *testing.T) {
	ev := func(fp map[string]any) *store.Evaluation {
		return &store.Evaluation{Target: "local", Result: &sdk.Result{Fingerprint: fp}}
	}
	h200a := hardware(ev(map[string]any{"gpu_name": "NVIDIA H200", "gpu_index": "0", "gpu_uuid": "GPU-a", "sm_clock_mhz": "1980", "torch": "2.11.0"}))
	h200b := hardware(ev(map[string]any{"gpu_name": "NVIDIA H200", "gpu_index": "3", "gpu_uuid": "GPU-b", "sm_clock_mhz": "1755", "torch": "2.11.0"}))
	a100 := hardware(ev(map[string]any{"gpu_name": "NVIDIA A100-SXM4-80GB", "gpu_index": "1", "torch": "2.11.0"}))
	if h200a != h200b {
		t.Errorf("two H200s are two hardwares: %q, %q", h200a, h200b)
	}
	if h200a == a100 {
		t.Errorf("an H200 and an A100 pooled as %q", a100)
	}

	st := reporttest.Open(t)
	reporttest.Put(t, st, "studyaaaaaaaaaaaaaaa", "cpu run", reporttest.CPUA, false, reporttest.StudyA())
	reporttest.Put(t, st, "studybbbbbbbbbbbbbbb", "gpu rerun", reporttest.GPUB, true, reporttest.StudyB())
	a, _ := Load(st, "studyaaa", LoadOptions{})
	b, _ := Load(st, "studybbb", LoadOptions{})
	if r := Build(a, Options{}); r.Hardware != nil {
		t.Errorf("one hardware listed as %v", r.Hardware)
	}
	both := &Study{ID: "mixed", Attempts: append(append([]Attempt(nil), a.Attempts...), b.Attempts...)}
	r := Build(both, Options{})
	if len(r.Hardware) != 2 {
		t.Fatalf("hardware of a mixed study: %v", r.Hardware)
	}
	var buf bytes.Buffer
	if err := r.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "ran on 2 kinds of hardware") || !strings.Contains(buf.String(), "--compare mixed") {
		t.Errorf("the report does not say it pools two hardwares:\n%s", buf.String())
	}
}
