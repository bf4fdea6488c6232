package cli

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fastContract keeps CPU evaluations short in tests.
var fastContract = []string{"--seeds", "1", "--timed-calls", "10", "--warmup", "1", "--check-calls", "2"}

// studyShown is what the tests read of `study show ID --json`.
type studyShown struct {
	Report struct {
		Outcomes []struct {
			Task    string `json:"task"`
			Arm     string `json:"arm"`
			Unit    string `json:"unit"`
			Done    bool   `json:"done"`
			Skipped bool   `json:"skipped"`
		} `json:"outcomes"`
	} `json:"report"`
	Attempts []struct {
		ID           string `json:"id"`
		Task         string `json:"task"`
		Arm          string `json:"arm"`
		Model        string `json:"model"`
		Backend      string `json:"backend"`
		Strategy     string `json:"strategy"`
		Target       string `json:"target"`
		EvaluationID string `json:"evaluation_id"`
	} `json:"attempts"`
}

func showStudy(t *testing.T, r binaryRunner, id string) studyShown {
	t.Helper()
	out, errOut, code := r.run("study", "show", id, "--json", "-q")
	if code != 0 {
		t.Fatalf("study show: %d\n%s", code, errOut)
	}
	var s studyShown
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("study show --json: %v\n%s", err, out)
	}
	return s
}

func statusOf(t *testing.T, r binaryRunner, id string) studyStatus {
	t.Helper()
	out, errOut, code := r.run("study", "status", id, "--json", "-q")
	if code != 0 {
		t.Fatalf("study status: %d\n%s", code, errOut)
	}
	var s studyStatus
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("study status --json: %v\n%s", err, out)
	}
	return s
}

// A study of several arms killed with -9 in the middle of its run restarts where it stopped:
// every unit finished before the kill stays finished and is not run again (its attempts are the
// same ones), the units in flight are redone, and the study ends with every unit done. While it
// runs, `study status` from another process says so; after the kill, that it stopped.
func TestStudyResumesAfterKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a study twice")
	}
	r := binaryRunner{t: t, bin: buildKbplatform(t), env: isolated(t)}
	file, _ := filepath.Abs(filepath.Join("..", "..", "examples", "studies", "ci.yaml"))
	args := append([]string{"study", "run", file, "--parallel", "2"}, fastContract...)
	first := r.command(args...)
	var out, errOut bytesBuffer
	first.Stdout, first.Stderr = &out, &errOut
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer first.Process.Kill()
	exited := make(chan struct{})
	go func() { _ = first.Wait(); close(exited) }()
	idRe := regexp.MustCompile(`study ([0-9a-f]{20}): 3 tasks × 2 arms`)
	deadline := time.Now().Add(5 * time.Minute)
	for !strings.Contains(errOut.String(), ": done in ") {
		select {
		case <-exited:
			t.Fatalf("the study ended before it could be killed:\n%s\n%s", out.String(), errOut.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no unit finished:\n%s", errOut.String())
		}
	}
	m := idRe.FindStringSubmatch(errOut.String())
	if m == nil {
		t.Fatalf("no study id in\n%s", errOut.String())
	}
	id := m[1]
	if st := statusOf(t, r, id); st.State != "running" || st.Total != 6 || st.Done < 1 || len(st.Arms) != 2 {
		t.Errorf("status while it runs: %+v", st)
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited

	st := statusOf(t, r, id)
	if st.State != "stopped" || !strings.Contains(st.Message, "resume") {
		t.Errorf("status after kill -9: %+v", st)
	}
	before := showStudy(t, r, id)
	doneBefore := map[string]bool{}
	for _, o := range before.Report.Outcomes {
		if o.Done {
			doneBefore[o.Unit] = true
		}
	}
	if len(doneBefore) < 1 || len(doneBefore) == 6 || len(doneBefore) != st.Done {
		t.Fatalf("%d units done before the kill (status says %d); want some but not all", len(doneBefore), st.Done)
	}
	unitOf := func(arm, task string) string { return arm + "/" + task }
	attemptsBefore := map[string][]string{}
	for _, a := range before.Attempts {
		if a.Arm == "" || a.Backend != "cpp" || a.Target != "local" || a.Model != "replay" || (a.Strategy != "one-shot" && a.Strategy != "few-shot") {
			t.Errorf("attempt without its arm: %+v", a)
		}
		attemptsBefore[unitOf(a.Arm, a.Task)] = append(attemptsBefore[unitOf(a.Arm, a.Task)], a.ID)
	}

	stdout, stderr, code := r.run(append(args, "--json")...)
	if code != 0 {
		t.Fatalf("resumed run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var resumed struct {
		Outcomes []struct {
			Unit    string `json:"unit"`
			Done    bool   `json:"done"`
			Skipped bool   `json:"skipped"`
		} `json:"outcomes"`
	}
	if err := json.Unmarshal([]byte(stdout), &resumed); err != nil || len(resumed.Outcomes) != 6 {
		t.Fatalf("resumed run's report: %v\n%s", err, stdout)
	}
	for _, o := range resumed.Outcomes {
		if o.Skipped != doneBefore[o.Unit] || !o.Done {
			t.Errorf("unit %s: skipped %v, done %v; finished before the kill: %v", o.Unit, o.Skipped, o.Done, doneBefore[o.Unit])
		}
	}
	if want := regexp.MustCompile(`(\d+) of 6 units done in an earlier run`).FindStringSubmatch(stderr); want == nil || want[1] != itoa(len(doneBefore)) {
		t.Errorf("the resumed run should skip the %d finished units:\n%s", len(doneBefore), stderr)
	}
	after := showStudy(t, r, id)
	attemptsAfter := map[string][]string{}
	for _, a := range after.Attempts {
		attemptsAfter[unitOf(a.Arm, a.Task)] = append(attemptsAfter[unitOf(a.Arm, a.Task)], a.ID)
	}
	for _, o := range after.Report.Outcomes {
		if !o.Done {
			t.Errorf("unit %s not done after the resumed run", o.Unit)
		}
		if len(attemptsAfter[o.Unit]) == 0 {
			t.Errorf("unit %s has no attempt", o.Unit)
		}
		if doneBefore[o.Unit] {
			b, a := attemptsBefore[o.Unit], attemptsAfter[o.Unit]
			sort.Strings(b)
			sort.Strings(a)
			if strings.Join(a, ",") != strings.Join(b, ",") {
				t.Errorf("unit %s: attempts %v before, %v after: done twice or lost", o.Unit, b, a)
			}
		}
	}
	// No attempt stored before the kill is lost.
	for _, ids := range attemptsBefore {
		for _, id := range ids {
			found := false
			for _, a := range after.Attempts {
				found = found || a.ID == id
			}
			if !found {
				t.Errorf("attempt %s lost", id)
			}
		}
	}
	if st := statusOf(t, r, id); st.State != "finished" || st.Done != 6 {
		t.Errorf("status after the resumed run: %+v", st)
	}
	// One task's trajectory names both arms and each attempt's kernel, evaluation and verdict.
	traj, errOut2, code := r.run("study", "show", id, "--task", "kbp/l1/relu", "-q")
	if code != 0 {
		t.Fatalf("trajectory: %d\n%s", code, errOut2)
	}
	for _, w := range []string{"arm one-shot\n", "arm few-shot\n", "step 0  turn 0  sample 0  parent -", "prompt: 2 messages", "reply: ```python", "kernel ", "evaluation ", "pass"} {
		if !strings.Contains(traj, w) {
			t.Errorf("trajectory lacks %q:\n%s", w, traj)
		}
	}
	var list []studyListing
	lj, _, _ := r.run("study", "list", "--json", "-q")
	if err := json.Unmarshal([]byte(lj), &list); err != nil || len(list) != 1 || list[0].Done != 6 || list[0].Units != 6 || list[0].Arms != 2 || list[0].State != "finished" {
		t.Errorf("study list --json: %v %s", err, lj)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
