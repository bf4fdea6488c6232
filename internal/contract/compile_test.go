package contract

import (
	"context"
	"strings"
	"sync"
	"testing"
)

// TestCompileOnceBySource checks the compile memo: an identical source for the same task and
// settings is not compiled again (nor concurrently twice), a changed source is, and a failure is
// not remembered.
func TestCompileOnceBySource(t *testing.T) {
	e := newEvaluator(t, nil)
	task := loadTask(t, "scale_relu")
	k := loadKernel(t, "honest_torch")
	var wg sync.WaitGroup
	res := make([]*CompileResult, 3)
	for i := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = e.Compile(context.Background(), task, k, "cpu")
		}()
	}
	wg.Wait()
	compiled := 0
	for i, r := range res {
		if !r.OK {
			t.Fatalf("compile %d: %s %s", i, r.ErrorClass, r.Message)
		}
		if !strings.HasPrefix(r.Log, "not compiled again") {
			compiled++
		}
	}
	if compiled != 1 {
		t.Fatalf("%d of 3 concurrent compiles of one source ran, want 1", compiled)
	}
	again := e.Compile(context.Background(), task, k, "cpu")
	if !again.OK || !strings.HasPrefix(again.Log, "not compiled again") || again.Duration > res[0].Duration+res[1].Duration+res[2].Duration {
		t.Fatalf("the same source again: %+v", again)
	}
	changed := k
	changed.Source += "\n# a comment makes another source\n"
	if r := e.Compile(context.Background(), task, changed, "cpu"); !r.OK || strings.HasPrefix(r.Log, "not compiled again") {
		t.Fatalf("a changed source: ok=%v log %q", r.OK, r.Log)
	}
	if r := e.Compile(context.Background(), loadTask(t, "scale_relu_big"), k, "cpu"); !r.OK || strings.HasPrefix(r.Log, "not compiled again") {
		t.Fatalf("another task: ok=%v log %q", r.OK, r.Log)
	}
	bad := loadKernel(t, "syntax_error")
	for i := range 2 {
		if r := e.Compile(context.Background(), task, bad, "cpu"); r.OK || strings.HasPrefix(r.Log, "not compiled again") {
			t.Fatalf("failing source, compile %d: ok=%v log %q", i, r.OK, r.Log)
		}
	}
}
