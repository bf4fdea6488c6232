package cli

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A study budget stops new units and says so; the study resumes under a bigger one with the same
// id, skipping what it finished. A unit budget makes the strategy's calls past it fail: oneshot
// then records why and finishes without a kernel.
func TestStudyAndUnitBudgets(t *testing.T) {
	env := isolated(t)
	file, _ := filepath.Abs(filepath.Join("..", "..", "examples", "studies", "ci.yaml"))
	args := append([]string{"study", "run", file, "--tasks", "kbp/l1/relu", "--parallel", "1"}, fastContract...)
	out, errOut, code := run(t, env, append(args, "--study-budget-seconds", "1")...)
	if code != 3 || !strings.Contains(out+errOut, "study budget reached") || !strings.Contains(out+errOut, "1 units not started") {
		t.Fatalf("under a 1 s study budget: exit %d\n%s\n%s", code, out, errOut)
	}
	m := regexp.MustCompile(`study ([0-9a-f]{20}): 1 tasks × 2 arms`).FindStringSubmatch(errOut)
	if m == nil {
		t.Fatalf("no study id:\n%s", errOut)
	}
	status, _, _ := run(t, env, "study", "status", m[1])
	if !strings.Contains(status, ": budget, 1/2 units done") {
		t.Errorf("status of a study its budget stopped:\n%s", status)
	}
	// The file's own study budget (an hour) lets it finish.
	out, errOut, code = run(t, env, args...)
	if code != 0 || !strings.Contains(errOut, "1 of 2 units done in an earlier run") || !strings.Contains(errOut, "study "+m[1]) {
		t.Fatalf("resumed under a bigger budget: exit %d\n%s\n%s", code, out, errOut)
	}
	if !regexp.MustCompile(`one-shot\s+kbp/l1/relu\s+done \(earlier run\)`).MatchString(out) || !regexp.MustCompile(`few-shot\s+kbp/l1/relu\s+done\s`).MatchString(out) {
		t.Errorf("outcomes by arm:\n%s", out)
	}

	// A unit budget of a microsecond: the generation is refused, nothing is evaluated.
	out, errOut, code = run(t, env, append(args, "--budget-seconds", "0.000001")...)
	if code != 0 {
		t.Fatalf("under a unit budget: exit %d\n%s\n%s", code, out, errOut)
	}
	if strings.Count(out, "budget exhausted") != 2 || strings.Contains(out, " yes ") {
		t.Errorf("each arm should finish without a kernel, its budget spent:\n%s", out)
	}
}
