package contract

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

// Every evaluation runs its candidate in a new process, and a new process pays the import of
// torch (and of torch._dynamo, which the tamper guard needs imported first): 3-7 s on the H200's
// host, more than the rest of a small evaluation. A spare is the next evaluation's candidate
// process, started while the current one runs. It imports everything and touches no device
// (CUDA is initialised by its hello, once an evaluation takes it), so it shares nothing with
// the running evaluation; each evaluation still gets a process of its own, used once.
//
// The reference process is kept per task (refpool.go), so it is started once per task, not per
// evaluation; but work that moves from task to task (a baseline of the suite, a study) started
// one for every task and waited for its imports, about half of an eager A/A's 9 s a task. Spare
// reference processes are kept beside the candidate spares for the next tasks that need one.
// Each is as clean as one started then: nothing but the harness has run in it.

// SpareMode says when an Evaluator starts spare worker processes.
type SpareMode int

const (
	SparesAuto SpareMode = iota // on GPUs only
	SparesOn
	SparesOff
)

// workerProc is a worker process, the folder it runs in (a candidate's is its evaluation's), and
// the settings its hello sends.
type workerProc struct {
	p        *proc
	dir      string
	settings workerSettings
}

// spareDepth is how many spares are kept per kind of candidate process to begin with. A spare's
// imports take 8-12 s of CPU on the H200's host, and spares are stopped while a timing runs, so a
// spare makes progress only in the few seconds of each evaluation outside its timing: it is
// started three evaluations before one takes it.
const spareDepth = 3

// spareReferences is how many spare reference processes are kept per device to begin with. A new
// task comes at most once per evaluation, but a spare's imports only progress outside the timing
// phases (as a candidate spare's), so each is started two evaluations before one takes it. A batch
// on one task never takes one: two idle processes that touched no device.
const spareReferences = 2

func sparesWanted(role string) int {
	if role == "reference" {
		return spareReferences
	}
	return spareDepth
}

// A fixed depth was too shallow where evaluations are short and every one needs a new process:
// over KernelBench's level 1 (3.9 s a task on an H100) every other task waited 2-7 s for a spare
// reference whose imports had not finished, and those waits made all of its worst wall times. How
// far ahead a spare must start depends on the host's import time and on how much of each
// evaluation is not a timing, which only the run knows; so a key whose spare was taken before it
// was ready keeps one more from then on (spareLimit at most), and a key whose spares are always
// ready (a batch on one task) keeps what it began with. On the same H100, the same 74 tasks went
// from 3.8 to 2.4 s a task (docs/benchmarks.md, 2026-12-07).

// hostSpareLimit is the most spares kept per key on a host with cpus cores: half of them, for each
// importing spare takes a core outside the timing phases, at most eight, and never fewer than a
// role begins with (a small host keeps the fixed depth). It is per key, so per device: each
// device's evaluations take their own spares.
func hostSpareLimit(role string, cpus int) int {
	return max(sparesWanted(role), min(8, cpus/2))
}

// sparesKept is how many spares key keeps now: what its role begins with, plus one for each time
// one of its spares was taken before it was ready. Callers hold e.mu.
func (e *Evaluator) sparesKept(role, key string) int {
	if n, ok := e.spareDepths[key]; ok {
		return n
	}
	return sparesWanted(role)
}

// spare is a worker process being prepared for a later evaluation (or task).
type spare struct {
	c     *workerProc
	ready chan struct{}
	err   error
}

func (s *spare) discard() {
	<-s.ready
	s.c.p.close()
	os.RemoveAll(s.c.dir)
}

func (e *Evaluator) sparesOn(device string) bool {
	switch e.opt.Spares {
	case SparesOn:
		return true
	case SparesOff:
		return false
	}
	return strings.HasPrefix(device, "cuda")
}

// workerKey identifies the processes that can serve a role on a device: the same role, device,
// environment and settings.
func (e *Evaluator) workerKey(role, device string) (string, error) {
	env, settings, err := e.workerSetup(role, device)
	if err != nil {
		return "", err
	}
	b, _ := json.Marshal(settings)
	return role + "\x00" + device + "\x00" + strings.Join(env, "\x00") + "\x00" + string(b), nil
}

func (e *Evaluator) newWorker(role, device string) (*workerProc, error) {
	prefix := "eval-"
	if role == "reference" {
		prefix = "ref-"
	}
	dir, err := privateDir(e.opt.WorkDir, prefix)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrHarness, e.noRoom(err))
	}
	p, settings, err := e.spawn(role, device, dir, "")
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &workerProc{p: p, dir: dir, settings: settings}, nil
}

// startSpares tops the spares of key up to what its role keeps.
func (e *Evaluator) startSpares(role, device, key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for len(e.spares[key]) < e.sparesKept(role, key) {
		c, err := e.newWorker(role, device)
		if err != nil {
			return // the next evaluation (or task) starts its own
		}
		s := &spare{c: c, ready: make(chan struct{})}
		e.spares[key] = append(e.spares[key], s)
		go func() {
			defer close(s.ready)
			_, s.err = call(context.Background(), c.p, e.opt.Config.CallTimeout+time.Minute, prepareRequest{})
		}()
	}
}

// quietSpares stops every spare while f runs (a timing phase): a spare's imports are CPU work
// that must not run beside a timed call.
func (e *Evaluator) quietSpares(f func()) {
	e.mu.Lock()
	var all []*spare
	for _, ss := range e.spares {
		all = append(all, ss...)
	}
	for _, s := range all {
		s.c.p.pause()
	}
	e.mu.Unlock()
	defer func() {
		for _, s := range all {
			s.c.p.resume()
		}
	}()
	f()
}

// workerProcess returns a new process of a role (an evaluation's candidate, or a task's
// reference): a ready spare when there is one, else a new process. When spares are on it starts
// the next one.
func (e *Evaluator) workerProcess(ctx context.Context, role, device string) (*workerProc, error) {
	key, err := e.workerKey(role, device)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	var s *spare
	if ss := e.spares[key]; len(ss) > 0 {
		s, e.spares[key] = ss[0], ss[1:]
	}
	e.mu.Unlock()
	if e.sparesOn(device) {
		defer e.startSpares(role, device, key)
	}
	if s != nil {
		if c, ok := e.takeSpare(ctx, role, key, s); ok {
			return c, nil
		}
		go s.discard()
	}
	return e.newWorker(role, device)
}

// spareLate is the shortest wait for a spare that counts as its imports being late; a shorter one
// is its last reply in flight (the H100 showed waits of 0.0 s among the 0.3-4.3 s ones).
const spareLate = 200 * time.Millisecond

// takeSpare waits for spare s of key to finish its imports and returns its process, or false when
// it failed or ctx ended first. A spare not ready when taken (for spareLate or longer) means the
// spares of key start too late: key keeps one more from then on, up to spareLimit.
func (e *Evaluator) takeSpare(ctx context.Context, role, key string, s *spare) (*workerProc, bool) {
	select {
	case <-s.ready:
	default:
		t0 := time.Now()
		select {
		case <-s.ready:
		case <-ctx.Done():
			return nil, false
		}
		if waited := time.Since(t0); waited >= spareLate {
			e.mu.Lock()
			kept, why := e.sparesKept(role, key), ""
			switch {
			case kept >= e.spareLimit(role):
				why = " (the most this host keeps)"
			case !e.memoryRoom():
				why = " (no more: less than a quarter of the host's memory is available)"
			default:
				kept++
				e.spareDepths[key] = kept
			}
			e.mu.Unlock()
			e.progress("%s process: waited %.1f s for a spare's imports; keeping %d spare %s processes from now on%s", role, waited.Seconds(), kept, role, why)
		}
	}
	if s.err != nil || s.c.p.exited() {
		return nil, false
	}
	e.progress("%s process: a spare, started during an earlier evaluation", role)
	return s.c, true
}

// memoryRoom says whether the host has memory for one more spare: a quarter of its memory still
// available. An idle spare holds its imports (115 MB of anonymous memory for torch 1.13 on the
// development VM; more for a CUDA build with torch._dynamo and triton), so the deepest queues (16
// spares on one GPU) could take GiBs from a workstation's evaluations. A host that does not say
// (no /proc/meminfo) has room.
func (e *Evaluator) memoryRoom() bool {
	avail, err1 := e.memInfo("MemAvailable")
	total, err2 := e.memInfo("MemTotal")
	return err1 != nil || err2 != nil || avail >= total/4
}

// spareLimit is hostSpareLimit for this host, or the limit a test set.
func (e *Evaluator) spareLimit(role string) int {
	if e.spareCap > 0 {
		return max(sparesWanted(role), e.spareCap)
	}
	return hostSpareLimit(role, runtime.NumCPU())
}
