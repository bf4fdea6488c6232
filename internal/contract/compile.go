package contract

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Compile imports the candidate in its own process on the CPU side, filling the build cache.
func (e *Evaluator) Compile(ctx context.Context, t Task, k Kernel, device string) *CompileResult {
	start := time.Now()
	res := &CompileResult{}
	fail := func(class, msg, tb, log string) *CompileResult {
		res.OK, res.ErrorClass, res.Message, res.Traceback, res.Log = false, class, msg, tb, log
		res.Duration = time.Since(start)
		return res
	}
	dir, err := os.MkdirTemp(e.opt.WorkDir, "compile-")
	if err != nil {
		return fail(ClassHarness, err.Error(), "", "")
	}
	defer os.RemoveAll(dir)
	taskPath, err := e.writeTask(t)
	if err != nil {
		return fail(ClassHarness, err.Error(), "", "")
	}
	kpath := filepath.Join(dir, "candidate.py")
	if err := os.WriteFile(kpath, []byte(k.Source), 0o600); err != nil {
		return fail(ClassHarness, err.Error(), "", "")
	}
	p, settings, err := e.spawn("candidate", device, dir)
	if err != nil {
		return fail(ClassHarness, err.Error(), "", "")
	}
	defer p.close()
	if _, err := e.hello(ctx, p, settings); err != nil {
		return fail(classOf(err), err.Error(), "", p.log.String())
	}
	build := false
	rep, err := call(ctx, p, e.opt.Config.CompileTimeout, loadRequest{TaskPath: taskPath, KernelPath: kpath, Build: &build})
	if err != nil {
		cls, msg, tb := describeErr(err)
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
