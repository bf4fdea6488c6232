package cli

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kbplatform/kbplatform/internal/store"
)

// faultKills is how many times TestStudySurvivesRandomKills kills the study.
const faultKills = 30

// unitState is what the database says of one finished unit: its attempts and best evaluation.
type unitState struct {
	attempts []string // sorted ids
	best     string
}

func (u unitState) String() string { return strings.Join(u.attempts, ",") + " best " + u.best }

// faultStudy is what the fault-injection test reads of `study show ID --json`.
type faultStudy struct {
	Report struct {
		Outcomes []struct {
			Task           string `json:"task"`
			Arm            string `json:"arm"`
			Unit           string `json:"unit"`
			Done           bool   `json:"done"`
			Attempts       int    `json:"attempts"`
			BestEvaluation string `json:"best_evaluation"`
		} `json:"outcomes"`
	} `json:"report"`
	Attempts []struct {
		ID           string `json:"id"`
		Task         string `json:"task"`
		Arm          string `json:"arm"`
		EvaluationID string `json:"evaluation_id"`
	} `json:"attempts"`
}

// A study killed with SIGKILL at random points, again and again, loses nothing and leaves
// nothing: after every kill the database opens and is whole (db check), every unit stored before
// (or that the killed run said was done) is still there with the same attempts, no process the
// run started lives on; after the last run every unit is done exactly once (one attempt each, as
// its budget allows), each best evaluation can be read, and no work folder or socket is left.
//
// Most kills land in the first seconds of a run (opening the database and replaying the killed
// run's log, starting plugins and workers, the first builds); about a third wait for a unit to
// finish and land at a random point of the next one (its evaluation, its records being written).
// KBP_FAULT_SEED replays one sequence of kill points.
func TestStudySurvivesRandomKills(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and kills a study 30 times")
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("KBP_FAULT_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("kill points from seed %d (KBP_FAULT_SEED=%d replays them)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0x6b696c6c))
	env := isolated(t)
	r := binaryRunner{t: t, bin: buildKbplatform(t), env: env}
	file, _ := filepath.Abs(filepath.Join("..", "..", "examples", "studies", "ci.yaml"))
	args := append([]string{"study", "run", file, "--parallel", "2"}, fastContract...)
	const units = 6 // ci.yaml: 3 tasks × 2 arms

	seen := map[string]unitState{} // every unit any check saw done, as first seen
	var kills, lost, dups, leftovers int
	var id string
	doneLine := regexp.MustCompile(`(?m)^·\s+[0-9.]+s (.+): done in [0-9.]+s$`)
	for run := 0; kills < faultKills; run++ {
		if run > 3*faultKills {
			t.Fatalf("only %d kills in %d runs: the runs end before they can be killed", kills, run)
		}
		late := len(seen) < units-2 && rng.Float64() < 0.35
		cmd := r.command(args...)
		var errOut bytesBuffer
		cmd.Stderr = &errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		var wait <-chan time.Time
		if late {
			// After a unit finished in this run, somewhere in the next one.
			for end := time.Now().Add(4 * time.Minute); !strings.Contains(errOut.String(), ": done in ") && time.Now().Before(end); {
				time.Sleep(20 * time.Millisecond)
			}
			wait = time.After(time.Duration(rng.Float64() * float64(4*time.Second)))
		} else {
			wait = time.After(200*time.Millisecond + time.Duration(rng.Float64()*float64(2300*time.Millisecond)))
		}
		var tree []procEntry
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("run %d ended before its kill: %v\n%s", run, err, errOut.String())
			}
			if len(seen) < units {
				t.Fatalf("run %d finished before its kill, yet the study is not done", run)
			}
			continue
		case <-wait:
			tree = procTree(cmd.Process.Pid)
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-exited
			kills++
		}
		// Nothing the killed run started outlives it (its plugins and workers get a parent-death
		// signal; give them a moment).
		for end := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			var alive []string
			for _, p := range tree {
				if p.alive() {
					alive = append(alive, strconv.Itoa(p.pid)+" "+p.cmd)
				}
			}
			if len(alive) == 0 {
				break
			}
			if time.Now().After(end) {
				leftovers += len(alive)
				t.Errorf("kill %d: %d processes outlived the run:\n%s", kills, len(alive), strings.Join(alive, "\n"))
				for _, p := range tree {
					_ = syscall.Kill(p.pid, syscall.SIGKILL)
				}
				break
			}
		}
		if _, err := os.Stat(env["KBP_DB"]); os.IsNotExist(err) {
			continue // killed before it made the database
		}
		if out, errOut, code := r.run("db", "check"); code != 0 {
			t.Fatalf("kill %d: db check exits %d after the kill:\n%s%s", kills, code, out, errOut)
		}
		if id == "" {
			id = studyID(t, r)
			if id == "" {
				continue // killed before it stored the study
			}
		}
		now := unitStates(t, r, id)
		for _, m := range doneLine.FindAllStringSubmatch(errOut.String(), -1) {
			label := m[1] // "<arm> · <task>"
			if _, ok := now[label]; !ok {
				lost++
				t.Errorf("kill %d: the killed run said %q was done; the database does not have it", kills, label)
			}
		}
		lost += compareUnits(t, fmt.Sprintf("kill %d", kills), seen, now)
		for u, s := range now {
			if _, ok := seen[u]; !ok {
				seen[u] = s
			}
		}
		said := "(no output yet)"
		if errOut.String() != "" {
			said = strings.TrimSpace(lastLine(errOut.String()))
		}
		t.Logf("kill %d (%s) after %s: %d of %d units done", kills, map[bool]string{true: "late", false: "early"}[late], said, len(now), units)
	}

	// The last run goes to the end and skips every unit done before.
	out, errOut, code := r.run(append(args, "--json")...)
	if code != 0 {
		t.Fatalf("the run after %d kills exits %d:\n%s\n%s", kills, code, out, errOut)
	}
	if id == "" {
		id = studyID(t, r)
	}
	final := unitStates(t, r, id)
	lost += compareUnits(t, "the last run", seen, final)
	if len(final) != units {
		t.Errorf("%d of %d units done after the last run", len(final), units)
	}
	st := showFault(t, r, id)
	perUnit := map[string]int{}
	for _, o := range st.Report.Outcomes {
		perUnit[o.Arm+" · "+o.Task]++
	}
	byUnit := map[string][]string{}
	for _, a := range st.Attempts {
		byUnit[a.Arm+"/"+a.Task] = append(byUnit[a.Arm+"/"+a.Task], a.ID)
	}
	for _, o := range st.Report.Outcomes {
		if n := perUnit[o.Arm+" · "+o.Task]; n > 1 {
			dups++
			t.Errorf("unit %s is in the report %d times", o.Unit, n)
		}
		// ci.yaml's budget is one generation and one evaluation per unit: more attempts stored
		// for a unit are a run's that was killed and done again, counted twice.
		if n := len(byUnit[o.Unit]); n > 1 || o.Attempts > 1 {
			dups += max(n, o.Attempts) - 1
			t.Errorf("unit %s has %d attempts stored (%d counted): %v", o.Unit, n, o.Attempts, byUnit[o.Unit])
		}
		if _, errOut, code := r.run("results", "show", o.BestEvaluation, "--json", "-q"); code != 0 {
			lost++
			t.Errorf("unit %s: its best evaluation %s cannot be read: %s", o.Unit, o.BestEvaluation, errOut)
		}
	}
	// No scratch folder, no socket and no process of any run is left.
	ents, _ := os.ReadDir(env["KBP_WORK_DIR"])
	for _, e := range ents {
		if e.Name() != "tasks" { // the rendered tasks, shared by every run
			leftovers++
			t.Errorf("left in the work folder: %s", e.Name())
		}
	}
	if sock, err := store.SocketPath(env["KBP_DB"]); err == nil {
		if _, err := os.Lstat(sock); err == nil {
			leftovers++
			t.Errorf("the database's socket %s is left", sock)
		}
	}
	for _, p := range processesWith("KBP_DB=" + env["KBP_DB"]) {
		leftovers++
		t.Errorf("a process of the study lives on: %s", p)
	}
	summary := fmt.Sprintf("kills %d, results lost %d, duplicates %d, leftovers %d", kills, lost, dups, leftovers)
	fmt.Println(summary)
	t.Log(summary)
}

// compareUnits counts the units seen done before that are gone or changed now.
func compareUnits(t *testing.T, when string, seen, now map[string]unitState) (lost int) {
	t.Helper()
	for u, was := range seen {
		is, ok := now[u]
		switch {
		case !ok:
			lost++
			t.Errorf("%s: unit %s was done (%s) and is not", when, u, was)
		case is.String() != was.String():
			lost++
			t.Errorf("%s: unit %s was done with %s, now %s", when, u, was, is)
		}
	}
	return lost
}

// unitStates reads the done units of the study, by "<arm> · <task>" as the run's progress names them.
func unitStates(t *testing.T, r binaryRunner, id string) map[string]unitState {
	t.Helper()
	st := showFault(t, r, id)
	byUnit := map[string][]string{}
	for _, a := range st.Attempts {
		byUnit[a.Arm+"/"+a.Task] = append(byUnit[a.Arm+"/"+a.Task], a.ID)
	}
	out := map[string]unitState{}
	for _, o := range st.Report.Outcomes {
		if o.Done {
			ids := slices.Clone(byUnit[o.Unit])
			slices.Sort(ids)
			out[o.Arm+" · "+o.Task] = unitState{attempts: ids, best: o.BestEvaluation}
		}
	}
	return out
}

func showFault(t *testing.T, r binaryRunner, id string) faultStudy {
	t.Helper()
	out, errOut, code := r.run("study", "show", id, "--json", "-q")
	if code != 0 {
		t.Fatalf("study show: %d\n%s", code, errOut)
	}
	var s faultStudy
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("study show --json: %v\n%s", err, out)
	}
	return s
}

// studyID is the one study of the database, "" before one was stored.
func studyID(t *testing.T, r binaryRunner) string {
	t.Helper()
	out, errOut, code := r.run("study", "list", "--json", "-q")
	if code != 0 {
		t.Fatalf("study list: %d\n%s", code, errOut)
	}
	var list []studyListing
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("study list --json: %v\n%s", err, out)
	}
	if len(list) == 0 {
		return ""
	}
	return list[0].ID
}

// processesWith lists the live processes whose environment holds entry (the plugins a study
// started carry its KBP_DB; sandboxed workers do not, and are found below their run instead).
func processesWith(entry string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !slices.Contains(strings.Split(string(b), "\x00"), entry) {
			continue
		}
		if st, ok := readStat(pid); !ok || st.state == "Z" {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		out = append(out, e.Name()+" "+strings.ReplaceAll(string(cmd), "\x00", " "))
	}
	return out
}
