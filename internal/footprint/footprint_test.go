package footprint

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
)

func python(t *testing.T) string {
	p := os.Getenv("KBP_PYTHON")
	if p == "" {
		p = "/usr/bin/python3"
	}
	if _, err := os.Stat(p); err != nil {
		t.Skip("no python with torch")
	}
	return p
}

const taskTmpl = `import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self, *a):
        super().__init__()
        self.l = nn.Linear(*a) if a else None
    def forward(self, x):
        return self.l(x) if self.l is not None else x * 2
def get_inputs():
    return [torch.randn(%s)]
def get_init_inputs():
    return [%s]
`

func TestProbe(t *testing.T) {
	py := python(t)
	tests := []struct {
		name, shape, init string
		inputs, params    int64
		output            int64
		err               bool
	}{
		// 2^20 × 2^16 float32 = 256 GiB, estimated without allocating it.
		{name: "huge input", shape: "1 << 20, 1 << 16", inputs: 1 << 38, output: 1 << 38},
		{name: "linear", shape: "8, 64", init: "64, 32", inputs: 8 * 64 * 4, params: (64*32 + 32) * 4, output: 8 * 32 * 4},
		{name: "broken get_inputs", shape: "'x'", err: true},
	}
	var tasks []Task
	for _, tc := range tests {
		tasks = append(tasks, Task{ID: tc.name, Source: fmt.Sprintf(taskTmpl, tc.shape, tc.init)})
	}
	got, err := Probe(context.Background(), py, tasks)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := got[tc.name]
			if tc.err {
				if e.Error == "" {
					t.Fatalf("no error reported: %+v", e)
				}
				return
			}
			if e.Error != "" || e.InputsBytes != tc.inputs || e.ParamsBytes != tc.params || e.OutputBytes != tc.output || !e.OutputKnown {
				t.Fatalf("got %+v, want inputs %d params %d output %d", e, tc.inputs, tc.params, tc.output)
			}
		})
	}
}

// MemInfo reads /proc/meminfo's fields in bytes, and says so when a field is not there.
func TestMemInfo(t *testing.T) {
	total, err := TotalRAM()
	if err != nil || total < 1<<20 {
		t.Fatalf("MemTotal %d: %v", total, err)
	}
	avail, err := MemInfo("MemAvailable")
	if err != nil || avail <= 0 || avail > total {
		t.Fatalf("MemAvailable %d of %d: %v", avail, total, err)
	}
	if _, err := MemInfo("NoSuchField"); err == nil || !strings.Contains(err.Error(), "no NoSuchField in /proc/meminfo") {
		t.Fatalf("a missing field: %v", err)
	}
}
