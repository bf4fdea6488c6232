package cli

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// After `kill -9` of a running study, nothing it started lives on: not its plugins (each in a
// session of its own), not the target's shepherds and workers, not a spare candidate process.
// Before plugins were started with a parent-death signal, four plugin processes and six Python
// workers were still running minutes later, overlapping the next run and its timings.
func TestNothingOutlivesAKilledStudy(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a study")
	}
	r := binaryRunner{t: t, bin: buildKbplatform(t), env: isolated(t)}
	study := r.command("study", "run", "--tasks", "kbp/l1/relu", "--model", "replay",
		"--model-config", `{"source":"examples","backend":"cpp"}`, "--device", "cpu", "--seeds", "3", "--timed-calls", "300")
	var out, errOut bytesBuffer
	study.Stdout, study.Stderr = &out, &errOut
	if err := study.Start(); err != nil {
		t.Fatal(err)
	}
	defer study.Process.Kill()
	deadline := time.Now().Add(4 * time.Minute)
	for !strings.Contains(errOut.String(), "correctness trial") {
		if time.Now().After(deadline) || study.ProcessState != nil {
			t.Fatalf("the study never reached its correctness trials:\n%s", errOut.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	tree := procTree(study.Process.Pid)
	var names []string
	for _, p := range tree {
		names = append(names, p.cmd)
	}
	if len(tree) < 4 { // plugins, a shepherd, a worker at least
		t.Fatalf("only %d processes below the study: %v", len(tree), names)
	}
	if err := study.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = study.Wait()
	var alive []procEntry
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		alive = alive[:0]
		for _, p := range tree {
			if p.alive() {
				alive = append(alive, p)
			}
		}
		if len(alive) == 0 {
			return
		}
	}
	var left []string
	for _, p := range alive {
		left = append(left, strconv.Itoa(p.pid)+" "+p.cmd)
	}
	t.Fatalf("%d of %d processes outlived the study's kill -9 by 15 s:\n%s", len(alive), len(tree), strings.Join(left, "\n"))
}

// procEntry is a process seen in /proc: its pid, its start time (so a reused pid is not taken
// for it) and its command line.
type procEntry struct {
	pid   int
	start string
	cmd   string
}

func (p procEntry) alive() bool {
	st, ok := readStat(p.pid)
	return ok && st.start == p.start && st.state != "Z" && st.state != "X"
}

type statFields struct {
	ppid         int
	state, start string
}

func readStat(pid int) (statFields, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return statFields{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return statFields{}, false
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 20 {
		return statFields{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	return statFields{ppid: ppid, state: f[0], start: f[19]}, true
}

// procTree lists every live process below root.
func procTree(root int) []procEntry {
	entries, _ := os.ReadDir("/proc")
	kids := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(pid); ok {
			kids[st.ppid] = append(kids[st.ppid], pid)
		}
	}
	var out []procEntry
	todo := []int{root}
	for len(todo) > 0 {
		p := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		for _, k := range kids[p] {
			st, ok := readStat(k)
			if !ok {
				continue
			}
			cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(k) + "/cmdline")
			out = append(out, procEntry{pid: k, start: st.start, cmd: strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))})
			todo = append(todo, k)
		}
	}
	return out
}
