// Package footprint estimates the memory a task needs before it runs, so that a CPU evaluation
// that would exhaust the machine's RAM is refused with a hint instead of taking the machine down
// (KernelBench's level1/100_HingeLoss makes two 32768×32768 inputs: 4 GiB each, several copies).
//
// The estimate runs the task's own get_inputs, get_init_inputs and Model in one Python process
// with torch's tensor factories redirected to the meta device (probe.py): shapes and dtypes are
// exact and nothing is allocated.
package footprint

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

//go:embed probe.py
var probeScript []byte

// Copies is how many times a task's inputs, parameters and outputs are held at once during an
// evaluation on the CPU: the reference and the candidate processes each hold the inputs, their
// pristine copies, the parameters and the outputs.
const Copies = 4

// Estimate is what one task needs.
type Estimate struct {
	ID          string `json:"id"`
	InputsBytes int64  `json:"inputs_bytes"`
	ParamsBytes int64  `json:"params_bytes"`
	OutputBytes int64  `json:"output_bytes"`
	OutputKnown bool   `json:"output_known"`
	Note        string `json:"note,omitempty"`
	Error       string `json:"error,omitempty"` // the probe could not run the task's code (the contract will say why)
}

// Need is the estimated peak memory of an evaluation of the task.
func (e Estimate) Need() int64 { return Copies * (e.InputsBytes + e.ParamsBytes + e.OutputBytes) }

// Task is one task to estimate: an id and its rendered source.
type Task struct {
	ID     string
	Source string
}

// Probe estimates every task in one Python process (torch is imported once).
func Probe(ctx context.Context, python string, tasks []Task) (map[string]Estimate, error) {
	dir, err := os.MkdirTemp("", "kbp-footprint-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "probe.py")
	if err := os.WriteFile(script, probeScript, 0o600); err != nil {
		return nil, err
	}
	var in bytes.Buffer
	for i, t := range tasks {
		p := filepath.Join(dir, fmt.Sprintf("task%d.py", i))
		if err := os.WriteFile(p, []byte(t.Source), 0o600); err != nil {
			return nil, err
		}
		line, _ := json.Marshal(map[string]string{"id": t.ID, "path": p})
		in.Write(append(line, '\n'))
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute+time.Duration(len(tasks))*5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, script)
	cmd.Dir = dir
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	res := map[string]Estimate{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var e Estimate
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.ID != "" {
			res[e.ID] = e
		}
	}
	if err != nil && len(res) < len(tasks) {
		return res, fmt.Errorf("memory probe: %w: %s", err, lastLine(stderr.String()))
	}
	return res, nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TotalRAM reads the machine's memory from /proc/meminfo.
func TotalRAM() (int64, error) { return MemInfo("MemTotal") }

// MemInfo reads one field of /proc/meminfo (MemTotal, MemAvailable, ...) in bytes.
func MemInfo(field string) (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, field+":"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb << 10, err
			}
		}
	}
	return 0, fmt.Errorf("no %s in /proc/meminfo", field)
}

// GiB formats bytes for messages.
func GiB(b int64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }
