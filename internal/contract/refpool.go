package contract

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"time"
)

type refServer struct {
	p   *proc
	fp  Fingerprint
	ipc bool // can map the candidate's GPU outputs (CUDA IPC)
	// From its last load, on a GPU: the task's eager footprint, and the device's free and total
	// memory with the reference's task loaded. measured: a load has reported them.
	measured               bool
	footprint, free, total int64
	dir                    string
	mode                   string
	key                    string
	device                 string
	users                  int       // evaluations using it now; it is never ended under one
	used                   time.Time // last handed out, for eviction
	// dirty: its task's reference raised in it (under a probed distribution), which may leave a
	// process unusable (CUDA's errors are sticky); it ends once no evaluation uses it. Under e.mu.
	dirty bool
}

// liveReferences is how many idle reference processes a device keeps. Each holds its task's
// weights, rotating input sets and allocator cache (GBs for a gpu-size task): one per task would
// hold the whole suite's memory at once during a baseline of every task.
func liveReferences(device string) int {
	if strings.HasPrefix(device, "cuda") {
		return 1
	}
	return 4
}

// evictLocked takes idle reference processes of a device out of the cache, least recently
// used first, until at most liveReferences remain (keep is never taken), and returns them for
// the caller to end once it has let go of e.mu.
func (e *Evaluator) evictLocked(device, keep string) []*refServer {
	var out []*refServer
	for {
		var n int
		var victim *refServer
		for k, r := range e.refs {
			if r.device != device {
				continue
			}
			n++
			if k != keep && r.users == 0 && (victim == nil || r.used.Before(victim.used)) {
				victim = r
			}
		}
		if n <= liveReferences(device) || victim == nil {
			return out
		}
		delete(e.refs, victim.key)
		out = append(out, victim)
	}
}

func endReferences(rs []*refServer) {
	for _, r := range rs {
		r.p.close()
		os.RemoveAll(r.dir)
	}
}

// knownIPC says whether the device's reference processes map candidates' outputs through CUDA
// IPC, once a reference's hello has said so (ok false before).
func (e *Evaluator) knownIPC(device string) (ipc, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ipc, ok = e.ipc[device]
	return ipc, ok
}

// release hands a reference process back after an evaluation.
func (e *Evaluator) release(r *refServer) {
	e.mu.Lock()
	r.users--
	var done []*refServer
	switch {
	case r.users > 0:
	case e.refs[r.key] != r: // replaced while in use
		done = []*refServer{r}
	case r.dirty:
		delete(e.refs, r.key)
		done = []*refServer{r}
	default:
		done = e.evictLocked(r.device, "")
	}
	e.mu.Unlock()
	endReferences(done)
}

// refKey identifies a reference process: the task, where it runs, how, and the settings it was
// started with.
func (e *Evaluator) refKey(t Task, device, mode string) string {
	c := e.opt.Config
	return fmt.Sprintf("%s|%s|%s|flush=%v|poison=%v|threads=%d", t.Hash, device, mode, c.FlushCache, c.Poison, c.CPUThreads)
}

// reference returns the clean reference process for a task, starting it if needed. The caller
// hands it back with release.
func (e *Evaluator) reference(ctx context.Context, t Task, device, mode string) (*refServer, error) {
	key := e.refKey(t, device, mode)
	e.mu.Lock()
	r := e.refs[key]
	if r != nil && !r.p.exited() {
		r.users++
		r.used = time.Now()
		e.mu.Unlock()
		return r, nil
	}
	e.mu.Unlock()
	w, err := e.workerProcess(ctx, "reference", device)
	if err != nil {
		return nil, err // the harness's (spawn, a scratch folder)
	}
	h, err := e.hello(ctx, w.p, w.settings)
	if err != nil {
		log := w.p.log.String()
		w.p.close()
		os.RemoveAll(w.dir)
		return nil, &refFailure{err: err, log: log}
	}
	r = &refServer{p: w.p, fp: h.Fingerprint, ipc: h.IPC, dir: w.dir, mode: mode, key: key, device: device, users: 1, used: time.Now()}
	e.mu.Lock()
	if _, ok := e.ipc[device]; !ok {
		e.ipc[device] = h.IPC // the device's first: execute checks every later one against it
	}
	var done []*refServer
	if old := e.refs[key]; old != nil && old.users == 0 {
		done = append(done, old)
	}
	e.refs[key] = r
	// Make room before this one loads its task: the processes it displaces free their memory.
	done = append(done, e.evictLocked(device, key)...)
	e.mu.Unlock()
	endReferences(done)
	return r, nil
}

// refFailure wraps an error of the reference process: the task, not the kernel, is at fault.
type refFailure struct {
	err error
	log string
}

func (r *refFailure) Error() string { return "reference: " + r.err.Error() }
func (r *refFailure) Unwrap() error { return r.err }

// pendingRef is a reference process being started; wait returns it once started (as often as
// asked).
type pendingRef struct {
	c   chan struct{}
	ref *refServer
	err error
}

func startReference(start func() (*refServer, error)) *pendingRef {
	p := &pendingRef{c: make(chan struct{})}
	go func() {
		p.ref, p.err = start()
		close(p.c)
	}()
	return p
}

func (p *pendingRef) wait() (*refServer, error) {
	<-p.c
	return p.ref, p.err
}

// workerMemory is a worker's report of its device memory.
type workerMemory struct {
	PeakReserved  int64 `json:"peak_reserved"`
	PeakAllocated int64 `json:"peak_allocated"`
	// EvidencePeak is the float64 precision run's own peak, kept out of PeakReserved.
	EvidencePeak int64 `json:"evidence_peak_reserved"`
	// Harness is what the process's own buffers hold (the cache-flush buffer).
	Harness int64 `json:"harness"`
	Free    int64 `json:"free"`
	Total   int64 `json:"total"`
	// Ops is the process's own account of its operations since the last load.
	Ops map[string]workerOp `json:"ops"`
}

// workerOp is one kind of operation in a worker's account.
type workerOp struct {
	Calls     int     `json:"calls"`
	Seconds   float64 `json:"seconds"`
	Peak      int64   `json:"peak_reserved"`
	Allocated int64   `json:"peak_allocated"`
}

// accountedOps are the operations a worker accounts for (the worker leaves out hello, memory, gc
// and exit: the accounting's own, or before there is anything to account to).
var accountedOps = []string{"prepare", "load", "trial", "timed", "profile", "dump_last", "guard", "compare", "sensitivity", "probe", "inputs_repeat", "io_bytes", "validate"}

// phaseOps turns a worker's account into the record's form. Only operations of the protocol with
// sane numbers are kept: the candidate's account comes from a process that ran untrusted code,
// and what it wrote there must not grow or garble the record.
func phaseOps(ops map[string]workerOp) map[string]WorkerOp {
	out := map[string]WorkerOp{}
	for _, k := range accountedOps {
		o, ok := ops[k]
		if !ok || o.Calls < 0 || o.Seconds < 0 || o.Peak < 0 || o.Allocated < 0 || math.IsNaN(o.Seconds) || math.IsInf(o.Seconds, 0) {
			continue
		}
		out[k] = WorkerOp{Calls: o.Calls, Seconds: o.Seconds, PeakBytes: o.Peak, PeakAllocatedBytes: o.Allocated}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// noteLoad keeps what a load of the reference reported about memory.
func (r *refServer) noteLoad(rep loadReply) {
	r.measured = true
	if rep.Footprint > 0 {
		r.footprint, r.free, r.total = rep.Footprint, rep.Memory.Free, rep.Memory.Total
	}
}

// fits says why a candidate cannot be given room next to the reference, or "" when it can. A
// candidate needs at least the task's footprint (its inputs and outputs) and, for its own
// temporaries and CUDA context, as much again: a task that leaves less free fails here, before
// any candidate code runs, never with an out-of-memory error halfway through an evaluation.
func (r *refServer) fits() string {
	if r.footprint == 0 {
		return ""
	}
	need := 2 * r.footprint
	if need <= r.free {
		return ""
	}
	return fmt.Sprintf("the task does not fit %s next to a candidate: one eager forward needs %s (weights, inputs, outputs, temporaries), a candidate needs room for about twice that (%s), and with the reference loaded %s of %s are free",
		r.device, gib(r.footprint), gib(need), gib(r.free), gib(r.total))
}

func gib(b int64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }
