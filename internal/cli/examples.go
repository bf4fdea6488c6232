package cli

import (
	"fmt"
	"os/exec"
	"sort"
	"strings"

	"github.com/kbplatform/kbplatform/internal/pyenv"
)

// examplesNotes says what a run of the bundled kernels did not show: the kernels it skipped, and,
// on the CPU, what the speedups are measured against.
func (a *app) examplesNotes(device string, skipped map[string]int) {
	if n := total(skipped); n > 0 {
		var parts []string
		for _, b := range sortedKeys(skipped) {
			parts = append(parts, fmt.Sprintf("%d %s", skipped[b], b))
		}
		fmt.Fprintf(a.out, "skipped %d bundled kernel(s) that need a GPU (%s): this run used %s\n", n, strings.Join(parts, ", "), device)
	}
	if device != "cpu" {
		return
	}
	if blas := a.torchBLAS(); blas == "generic" {
		fmt.Fprintln(a.out, "note: this torch was built against the system's generic BLAS (BLAS_INFO=generic); on Debian that is the\n"+
			"      reference BLAS unless an optimized one (libopenblas0) is installed, so the speedups of matmul-like\n"+
			"      kernels above are measured against a slow eager baseline and are far larger than against MKL or OpenBLAS")
	}
}

// torchBLAS reads the BLAS the found torch was built with ("" when unknown).
func (a *app) torchBLAS() string {
	py, err := pyenv.Find(a.ctx, a.cfg.Python)
	if err != nil {
		return ""
	}
	out, err := exec.CommandContext(a.ctx, py.Path, "-c", "import torch; print(torch.__config__.show())").Output()
	if err != nil {
		return ""
	}
	_, rest, ok := strings.Cut(string(out), "BLAS_INFO=")
	if !ok {
		return ""
	}
	blas, _, _ := strings.Cut(rest, ",")
	return strings.TrimSpace(blas)
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
