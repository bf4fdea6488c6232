package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/internal/metrics"
	"github.com/kbplatform/kbplatform/internal/report/reporttest"
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
