package contract

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"time"
)

// Every evaluation runs its candidate in a new process, and a new process pays the import of
// torch (and of torch._dynamo, which the tamper guard needs imported first): 3-7 s on the H200's
// host, more than the rest of a small evaluation. A spare is the next evaluation's candidate
// process, started while the current one runs. It imports everything and touches no device
// (CUDA is initialised by its hello, once an evaluation takes it), so it shares nothing with
// the running evaluation; each evaluation still gets a process of its own, used once.

// SpareMode says when an Evaluator starts spare candidate processes.
type SpareMode int

const (
	SparesAuto SpareMode = iota // on GPUs only
	SparesOn
	SparesOff
)

// candidate is a candidate worker process, the folder it runs in (the evaluation's), and the
// settings its hello sends.
type candidate struct {
	p        *proc
	dir      string
	settings workerSettings
}

// spareDepth is how many spares are kept per kind of candidate process. A spare's imports take
// 8-12 s of CPU on the H200's host, and spares are stopped while a timing runs, so a spare makes
// progress only in the few seconds of each evaluation outside its timing: it is started three
// evaluations before one takes it.
const spareDepth = 3

// spare is a candidate process being prepared for a later evaluation.
type spare struct {
	c     *candidate
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

// candidateKey identifies the processes that can serve an evaluation: the same device,
// environment and settings.
func (e *Evaluator) candidateKey(device string) (string, error) {
	env, settings, err := e.workerSetup("candidate", device)
	if err != nil {
		return "", err
	}
	b, _ := json.Marshal(settings)
	return device + "\x00" + strings.Join(env, "\x00") + "\x00" + string(b), nil
}

func (e *Evaluator) newCandidate(device string) (*candidate, error) {
	dir, err := os.MkdirTemp(e.opt.WorkDir, "eval-")
	if err != nil {
		return nil, err
	}
	p, settings, err := e.spawn("candidate", device, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &candidate{p: p, dir: dir, settings: settings}, nil
}

// startSpares tops the spares of key up to spareDepth.
func (e *Evaluator) startSpares(device, key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for len(e.spares[key]) < spareDepth {
		c, err := e.newCandidate(device)
		if err != nil {
			return // the next evaluation starts its own
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

// candidateProcess returns the process an evaluation's candidate runs in: a ready spare when
// there is one, else a new process. When spares are on it starts the next one.
func (e *Evaluator) candidateProcess(ctx context.Context, device string) (*candidate, error) {
	key, err := e.candidateKey(device)
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
		defer e.startSpares(device, key)
	}
	if s != nil {
		select {
		case <-s.ready:
			if s.err == nil && !s.c.p.exited() {
				e.progress("candidate process: a spare, started during an earlier evaluation")
				return s.c, nil
			}
		case <-ctx.Done():
		}
		go s.discard()
	}
	return e.newCandidate(device)
}
