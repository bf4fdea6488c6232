package contract

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Compile imports the candidate in its own process on the CPU side, filling the build cache.
//
// A source that already compiled for the same task with the same build settings (device,
// interpreter, architecture, flags, environment) is not compiled again by this evaluator: its
// extensions are in the build cache already, and the process would only import torch to find
// them there (seconds of CPU that a batch's spare processes need). Concurrent compiles of one
// source wait for the first. Only successes are remembered: a failure may be the machine's.
func (e *Evaluator) Compile(ctx context.Context, t Task, k Kernel, device string) *CompileResult {
	key, err := e.compileKey(t, k, device)
	if err != nil {
		return e.compile(ctx, t, k, device)
	}
	for {
		e.mu.Lock()
		ent := e.compiles[key]
		if ent == nil {
			ent = &compileEntry{done: make(chan struct{})}
			if len(e.compiles) >= maxCompileMemo {
				clear(e.compiles)
			}
			e.compiles[key] = ent
			e.mu.Unlock()
			res := e.compile(ctx, t, k, device)
			e.mu.Lock()
			if res.OK {
				ent.res = &CompileResult{OK: true, Builds: res.Builds, CacheHits: res.CacheHits, Duration: res.Duration}
			} else if e.compiles[key] == ent {
				delete(e.compiles, key)
			}
			e.mu.Unlock()
			close(ent.done)
			return res
		}
		e.mu.Unlock()
		start := time.Now()
		select {
		case <-ent.done:
		case <-ctx.Done():
			return &CompileResult{ErrorClass: ClassTimeout, Message: "waiting for an identical source's compile: " + ctx.Err().Error(), Duration: time.Since(start)}
		}
		if first := ent.res; first != nil {
			return &CompileResult{OK: true, CacheHits: first.Builds + first.CacheHits, Duration: time.Since(start),
				Log: fmt.Sprintf("not compiled again: the same source compiled for this task with the same build settings in %.1f s earlier in this process\n", first.Duration.Seconds())}
		}
		// The first compile failed and was forgotten: compile (or wait for whoever does now).
	}
}

// maxCompileMemo bounds the compiles an evaluator remembers (a long study sees many sources).
const maxCompileMemo = 4096

// compileEntry is one source's compile: done closes when it ends; res is set when it succeeded.
type compileEntry struct {
	done chan struct{}
	res  *CompileResult
}

// compileKey names a compile by everything that decides its outcome: the task, the source and
// the candidate worker's settings and environment on the device.
func (e *Evaluator) compileKey(t Task, k Kernel, device string) (string, error) {
	env, settings, err := e.workerSetup("candidate", device)
	if err != nil {
		return "", err
	}
	js, err := json.Marshal(settings)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, part := range append([]string{t.Hash, k.Source, e.opt.Python.Path, string(js)}, env...) {
		fmt.Fprintf(h, "%d:%s", len(part), part)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// compile runs one compile in a new candidate process.
func (e *Evaluator) compile(ctx context.Context, t Task, k Kernel, device string) *CompileResult {
	start := time.Now()
	res := &CompileResult{}
	fail := func(class, msg, tb, log string) *CompileResult {
		res.OK, res.ErrorClass, res.Message, res.Traceback, res.Log = false, class, msg, tb, log
		res.Duration = time.Since(start)
		return res
	}
	dir, err := privateDir(e.opt.WorkDir, "compile-")
	if err != nil {
		return fail(ClassHarness, e.noRoom(err).Error(), "", "")
	}
	defer os.RemoveAll(dir)
	taskPath, err := e.writeTask(t)
	if err != nil {
		return fail(ClassHarness, e.noRoom(err).Error(), "", "")
	}
	kpath := filepath.Join(dir, "candidate.py")
	if err := os.WriteFile(kpath, []byte(k.Source), 0o600); err != nil {
		return fail(ClassHarness, e.noRoom(err).Error(), "", "")
	}
	p, settings, err := e.spawn("candidate", device, dir, e.buildDir(k, device))
	if err != nil {
		return fail(ClassHarness, err.Error(), "", "")
	}
	defer p.close()
	if _, err := e.hello(ctx, p, settings); err != nil {
		return fail(classOf(err), err.Error(), "", p.log.String())
	}
	build := false
	staged := dirBytes(dir) // the harness's files; what the kernel's import adds is its own
	rep, err := call(ctx, p, e.opt.Config.CompileTimeout, loadRequest{TaskPath: taskPath, KernelPath: kpath, Build: &build})
	if err != nil {
		cls, msg, tb := describeErr(err)
		if claimsDiskFull(err, msg, tb) {
			// A compile writes its temporaries in its folder and its builds under the cache: a
			// full disk under either is the platform's once the driver confirms it (workroom.go).
			platform, why := e.judgeCompileFull(dir, e.buildDir(k, device), staged)
			if platform {
				return fail(ClassHarness, why+"\n"+msg, tb, p.log.String())
			}
			msg = why + ": " + msg
		}
		cls, msg = untrustedHarnessClaim(cls, msg, "compile")
		return fail(cls, msg, tb, p.log.String())
	}
	res.Builds, res.CacheHits = rep.ExtBuilds, rep.ExtHits
	if tampered := rep.Tampered; len(tampered) > 0 {
		return fail(ClassTampering, "harness functions were replaced at import: "+strings.Join(tampered, ", "), "", p.log.String())
	}
	res.OK = true
	res.Log = p.log.String()
	res.Duration = time.Since(start)
	return res
}
