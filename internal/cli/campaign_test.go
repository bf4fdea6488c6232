package cli

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/examples/kernels"
)

// campaign faults on the CPU: every C++ mutant of the bundled kernels goes through the real
// contract (sandbox, worker, target plugin). The honest files must pass at the campaign's sizes,
// no mutant may fail to build (a broken pattern tests nothing), and the contract must catch at
// least 98% of them. The builds are cached by source in the shared test cache.
func TestCampaignFaultsCatchesCPPMutants(t *testing.T) {
	env := isolated(t)
	env["KBP_PYTHON"] = "/usr/bin/python3"
	out, errOut, code := run(t, env, "campaign", "faults", "--language", "cpp", "--device", "cpu",
		"--timed-calls", "10", "--warmup", "1", "--check-calls", "2")
	if code != 0 {
		t.Fatalf("campaign faults: exit %d, want 0\n%s\n%s", code, out, errOut)
	}
	m := regexp.MustCompile(`faults cpp: (\d+) mutants, (\d+) caught, (\d+) missed \(([\d.]+)% caught\)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no closing line for cpp in\n%s", out)
	}
	n, _ := strconv.Atoi(m[1])
	caught, _ := strconv.Atoi(m[2])
	rate, _ := strconv.ParseFloat(m[4], 64)
	if n < 30 || caught < n*98/100 || rate < 98 {
		t.Errorf("%d mutants, %d caught (%.1f%%): want at least 30 mutants and 98%% caught\n%s", n, caught, rate, out)
	}
	if strings.Contains(out, "did not pass cleanly") || strings.Contains(out, "invalid ") {
		t.Errorf("an honest file failed or a mutant did not build:\n%s", out)
	}
}

// --list runs nothing and accounts for every class of every file: a mutant or "not applicable".
func TestCampaignFaultsList(t *testing.T) {
	env := isolated(t)
	out, errOut, code := run(t, env, "campaign", "faults", "--list", "--language", "cpp")
	if code != 0 {
		t.Fatalf("campaign faults --list: exit %d\n%s", code, errOut)
	}
	es, err := kernels.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.Backend != "cpp" {
			if strings.Contains(out, e.Name()) {
				t.Errorf("--language cpp lists %s", e.Name())
			}
			continue
		}
		// __syncthreads exists on the GPU only: the class is counted as not applicable to C++.
		if !strings.Contains(out, "missing_sync     "+e.Name()+": not applicable") {
			t.Errorf("%s: missing_sync not listed as not applicable\n%s", e.Name(), out)
		}
	}
	if !regexp.MustCompile(`(?m)^\d+ mutants; \d+ class-file pairs not applicable$`).MatchString(out) {
		t.Errorf("no count line in\n%s", out)
	}
	if _, errOut, code := run(t, env, "campaign", "faults", "--list", "--class", "typo"); code != 1 || !strings.Contains(errOut, "no fault class") {
		t.Errorf("--class typo: exit %d, %s", code, errOut)
	}
}
