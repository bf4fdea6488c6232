// Package scripts_test runs the repository's shell scripts against stand-in binaries, for the parts
// whose logic needs no GPU.
package scripts_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// stubKbplatform answers the calls kernelbench-sweep makes, and writes each call's arguments as one
// line of $STUB_LOG. `tasks list` prints $STUB_L<level> (task ids, space-separated) as JSON;
// `tasks validate --json ID...` reports every ID ok (and, given no ID at all, every task, as the
// real command does); `baseline` exits $STUB_BASELINE_RC.
const stubKbplatform = `#!/usr/bin/env bash
args=()
while [ $# -gt 0 ]; do
	case $1 in --db) shift 2 ;; *) args+=("$1"); shift ;; esac
done
echo "${args[*]}" >>"$STUB_LOG"
set -- "${args[@]}"
case "$1 $2" in
"tasks import") echo "imported 8 tasks from $3" ;;
"tasks list")
	var=STUB_L$6
	sep=; printf '['; for id in ${!var}; do printf '%s{"id":"%s"}' "$sep" "$id"; sep=,; done; echo ']' ;;
"tasks validate")
	shift 3
	[ $# -gt 0 ] || set -- $STUB_L1 $STUB_L2
	sep=; printf '['; for id in "$@"; do printf '%s{"task_id":"%s","ok":true}' "$sep" "$id"; sep=,; done; echo ']' ;;
"baseline "*) echo "TASK MODE STATUS"; exit "${STUB_BASELINE_RC:-0}" ;;
"results list") echo '[]' ;;
"version "*) echo "kbplatform stub" ;;
esac
`

type sweep struct {
	t     *testing.T
	root  string // the repository, where the script runs
	bin   string // the stand-in binaries
	state string
	log   string
	env   []string
}

func newSweep(t *testing.T) *sweep {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := &sweep{t: t, root: root, bin: filepath.Join(dir, "bin"), state: filepath.Join(dir, "state"), log: filepath.Join(dir, "calls.log")}
	if err := os.MkdirAll(s.bin, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(s.bin, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("kbplatform", stubKbplatform)
	write("contract.test", "#!/bin/sh\necho \"contract.test $*\" >>\"$STUB_LOG\"\necho '--- PASS: TestGPUContract (1.00s)'\n")
	kb := filepath.Join(dir, "KernelBench")
	if err := os.MkdirAll(filepath.Join(kb, "level1"), 0o755); err != nil {
		t.Fatal(err)
	}
	py := os.Getenv("KBP_PYTHON") // scripts/test sets it; the script only parses JSON with it
	if py == "" {
		py = "python3"
	}
	s.env = append(os.Environ(),
		"KBP_BIN="+s.bin, "KBP_SWEEP_STATE="+s.state, "KBP_KERNELBENCH="+kb, "KBP_PYTHON="+py,
		"KBP_WORK_DIR="+filepath.Join(dir, "work"), "STUB_LOG="+s.log, "KBP_SWEEP_GROUP=2",
		"STUB_L1=kernelbench/l1/1_a kernelbench/l1/10_b kernelbench/l1/2_c kernelbench/l1/3_d kernelbench/l1/4_e",
		"STUB_L2=kernelbench/l2/1_f kernelbench/l2/2_g kernelbench/l2/3_h",
		// No nvidia-smi on this PATH, as on a machine without a GPU.
		"PATH="+s.bin+":/usr/bin:/bin")
	return s
}

// run runs one call of the sweep and returns the stand-in calls it made.
func (s *sweep) run(extraEnv ...string) []string {
	s.t.Helper()
	if err := os.Remove(s.log); err != nil && !os.IsNotExist(err) {
		s.t.Fatal(err)
	}
	out := filepath.Join(s.t.TempDir(), "out")
	cmd := exec.Command(filepath.Join(s.root, "scripts", "kernelbench-sweep"), out, "120", "1", "2")
	cmd.Dir = s.root
	cmd.Env = append(slices.Clone(s.env), extraEnv...)
	b, err := cmd.CombinedOutput()
	if err != nil {
		s.t.Fatalf("kernelbench-sweep: %v\n%s", err, b)
	}
	if _, err := os.Stat(filepath.Join(out, "summary.txt")); err != nil {
		s.t.Errorf("no summary.txt: %v\n%s", err, b)
	}
	if _, err := os.Stat(filepath.Join(out, "logs.tgz")); err != nil {
		s.t.Errorf("no logs.tgz: %v", err)
	}
	calls, err := os.ReadFile(s.log)
	if err != nil {
		s.t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(calls)), "\n")
}

func matching(calls []string, prefix string) []string {
	var m []string
	for _, c := range calls {
		if strings.HasPrefix(c, prefix) {
			m = append(m, c)
		}
	}
	return m
}

// The first call validates in groups and times each level once; the second, on the same state,
// finds nothing left and must not run `tasks validate` with no task (which validates every task).
func TestKernelBenchSweepResumes(t *testing.T) {
	s := newSweep(t)
	calls := s.run()
	if got := len(matching(calls, "tasks import kernelbench")); got != 2 {
		t.Errorf("imports: %d, want 2 (one store each for validation and baseline)\n%s", got, strings.Join(calls, "\n"))
	}
	validate := matching(calls, "tasks validate")
	var validated []string
	for _, c := range validate {
		ids := strings.Fields(strings.TrimPrefix(c, "tasks validate --json"))
		if len(ids) == 0 || len(ids) > 2 {
			t.Errorf("validate call with %d tasks (group of 2): %q", len(ids), c)
		}
		validated = append(validated, ids...)
	}
	if len(validate) != 5 || len(validated) != 8 {
		t.Errorf("validate: %d calls over %d tasks, want 5 calls (3 + 2) over 8\n%s", len(validate), len(validated), strings.Join(validate, "\n"))
	}
	base := matching(calls, "baseline")
	if len(base) != 2 {
		t.Fatalf("baseline calls: %d, want one per level\n%s", len(base), strings.Join(calls, "\n"))
	}
	for _, want := range []string{"--modes eager", "--missing", "--timed-calls 20", "--task kernelbench/l1/1_a --task kernelbench/l1/10_b --task kernelbench/l1/2_c"} {
		if !strings.Contains(base[0], want) {
			t.Errorf("level 1 baseline lacks %q: %s", want, base[0])
		}
	}
	if !strings.Contains(base[1], "--task kernelbench/l2/1_f") || strings.Contains(base[1], "/l1/") {
		t.Errorf("level 2 baseline: %s", base[1])
	}
	if got := len(matching(calls, "contract.test")); got != 1 {
		t.Errorf("contract.test ran %d times, want 1", got)
	}

	calls = s.run()
	for _, c := range calls {
		if strings.HasPrefix(c, "tasks validate") || strings.HasPrefix(c, "baseline") || strings.HasPrefix(c, "contract.test") || strings.HasPrefix(c, "tasks import") {
			t.Errorf("second call repeated finished work: %q", c)
		}
	}
	sum, err := os.ReadFile(filepath.Join(s.state, "call2", "summary.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(sum), "validated: 8 tasks") {
		t.Errorf("summary does not count 8 validated tasks:\n%s", sum)
	}
	if !strings.Contains(string(sum), "kbplatform stub") {
		t.Errorf("summary does not say which binary ran (gpu_platform):\n%s", sum)
	}
}

// A baseline cut by the bound (exit 124) or ended by an error is taken up again by the next call;
// reverse order times a level's tasks from the last name to the first.
func TestKernelBenchSweepBaselineCutGoesOn(t *testing.T) {
	s := newSweep(t)
	calls := s.run("STUB_BASELINE_RC=124", "KBP_SWEEP_ORDER=reverse", "KBP_SWEEP_CONTRACT=0")
	base := matching(calls, "baseline")
	if len(base) != 2 || !strings.Contains(base[0], "--task kernelbench/l1/4_e --task kernelbench/l1/3_d") {
		t.Fatalf("baseline calls in reverse order expected:\n%s", strings.Join(base, "\n"))
	}
	if got := matching(calls, "contract.test"); len(got) != 0 {
		t.Errorf("KBP_SWEEP_CONTRACT=0 ran the contract test: %v", got)
	}
	calls = s.run("KBP_SWEEP_CONTRACT=0", "STUB_BASELINE_RC=1") // an error (a held database, say) is no finished level
	if got := len(matching(calls, "baseline")); got != 2 {
		t.Errorf("after a cut, the next call timed %d levels, want 2", got)
	}
	// Exit 4 (a task refused, a timing without verdict) ends a level that went through every task.
	calls = s.run("KBP_SWEEP_CONTRACT=0", "STUB_BASELINE_RC=4")
	if got := len(matching(calls, "baseline")); got != 2 {
		t.Errorf("after a cut, the next call timed %d levels, want 2", got)
	}
	if got := matching(calls, "tasks validate"); len(got) != 0 {
		t.Errorf("validated again: %v", got)
	}
	calls = s.run("KBP_SWEEP_CONTRACT=0")
	if got := matching(calls, "baseline"); len(got) != 0 {
		t.Errorf("a level whose baseline finished was timed again: %v", got)
	}
}
