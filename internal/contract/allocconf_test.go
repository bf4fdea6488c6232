package contract

import (
	"reflect"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/internal/pyenv"
	"github.com/kbplatform/kbplatform/sdk"
)

func TestAllocatorEnvKeepsTheWorkersOnCudaMallocSegments(t *testing.T) {
	cases := []struct {
		name    string
		vars    map[string]string
		env     []string
		changes int
	}{
		{"unset", map[string]string{}, nil, 0},
		{"other options pass through", map[string]string{"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:512"}, nil, 0},
		{"already off", map[string]string{"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:False"}, nil, 0},
		{"expandable turned off, the rest kept",
			map[string]string{"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:512, expandable_segments:True"},
			[]string{"PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:512,expandable_segments:False"}, 1},
		{"the device-neutral name too",
			map[string]string{"PYTORCH_ALLOC_CONF": "expandable_segments:true"},
			[]string{"PYTORCH_ALLOC_CONF=expandable_segments:False"}, 1},
		{"the asynchronous backend",
			map[string]string{"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"},
			[]string{"PYTORCH_CUDA_ALLOC_CONF=backend:native"}, 1},
		{"both, in both variables",
			map[string]string{"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync,expandable_segments:True", "PYTORCH_ALLOC_CONF": "expandable_segments:True"},
			[]string{"PYTORCH_CUDA_ALLOC_CONF=backend:native,expandable_segments:False", "PYTORCH_ALLOC_CONF=expandable_segments:False"}, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env, changed := allocatorEnv(func(k string) (string, bool) { v, ok := c.vars[k]; return v, ok })
			if !reflect.DeepEqual(env, c.env) || len(changed) != c.changes {
				t.Fatalf("env %q, changes %q; want %q and %d changes", env, changed, c.env, c.changes)
			}
		})
	}
}

func TestEveryGPUWorkerRunsWithoutExpandableSegments(t *testing.T) {
	t.Setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
	var notes []string
	e := &Evaluator{opt: Options{Python: &pyenv.Python{Path: "python3"}, Progress: func(s string) { notes = append(notes, s) }}, shared: &shared{}}
	for _, role := range []string{"reference", "candidate", "reference"} {
		env, _, err := e.workerSetup(role, "cuda:0")
		if err != nil {
			t.Fatal(err)
		}
		// Later entries win (os/exec keeps the last value of a repeated variable).
		last := ""
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, "PYTORCH_CUDA_ALLOC_CONF="); ok {
				last = v
			}
		}
		if last != "expandable_segments:False" {
			t.Fatalf("%s worker: PYTORCH_CUDA_ALLOC_CONF=%q", role, last)
		}
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "expandable_segments:True -> expandable_segments:False") {
		t.Fatalf("notices %q, want one naming the change", notes)
	}
	// A candidate's build recipe cannot turn them back on.
	e.opt.Recipe = &sdk.BuildRecipe{Env: map[string]string{"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,max_split_size_mb:64"}}
	env, _, err := e.workerSetup("candidate", "cuda:0")
	if err != nil {
		t.Fatal(err)
	}
	if got := env[len(env)-1]; got != "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False,max_split_size_mb:64" {
		t.Fatalf("last variable %q", got)
	}
	// The CPU has no CUDA allocator to change.
	env, _, _ = e.workerSetup("candidate", "cpu")
	for _, kv := range env {
		if strings.HasPrefix(kv, "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False") {
			t.Fatalf("cpu worker env %q", env)
		}
	}
}
