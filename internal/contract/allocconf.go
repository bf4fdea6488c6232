package contract

import (
	"os"
	"strings"
)

// allocConfVars are the variables PyTorch reads its CUDA allocator's options from: the CUDA name,
// and the device-neutral one of newer releases.
var allocConfVars = []string{"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"}

// allocatorEnv is how the workers' allocator options differ from what the caller's environment
// (and, for a candidate, its build recipe) says, and what changed, for a notice.
//
// The contract needs PyTorch's native caching allocator in plain cudaMalloc segments on both
// sides: a candidate's output reaches the reference through a CUDA IPC handle whose memory the
// reference bounds-checks against the one allocation the handle maps (transport.py). An
// expandable segment is mapped page by page, so the check failed for honest outputs and every
// kernel was judged as tampering (measured on an H100, PYTORCH_CUDA_ALLOC_CONF=
// expandable_segments:True: "IPC storage reaches past the mapped allocation"); the
// cudaMallocAsync backend cannot export a handle at all. Both are turned off, on both sides, so
// their timings run under one allocator; every other option (max_split_size_mb, say) passes
// through unchanged, and the record's fingerprint says what the workers ran with.
func allocatorEnv(lookup func(string) (string, bool)) (env []string, changed []string) {
	for _, name := range allocConfVars {
		v, ok := lookup(name)
		if !ok {
			continue
		}
		opts := strings.Split(v, ",")
		was := len(changed)
		for i, o := range opts {
			key, val, _ := strings.Cut(o, ":")
			key, val = strings.TrimSpace(key), strings.TrimSpace(val)
			switch {
			case key == "expandable_segments" && !strings.EqualFold(val, "false"):
				opts[i] = "expandable_segments:False"
				changed = append(changed, name+": "+strings.TrimSpace(o)+" -> expandable_segments:False")
			case key == "backend" && val != "native":
				opts[i] = "backend:native"
				changed = append(changed, name+": "+strings.TrimSpace(o)+" -> backend:native")
			}
		}
		if len(changed) > was {
			env = append(env, name+"="+strings.Join(opts, ","))
		}
	}
	return env, changed
}

// workerLookup reads a variable as a worker of the role would see it: the recipe's value (given
// to candidates and compile workers) over the process's own.
func workerLookup(recipeEnv map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		if v, ok := recipeEnv[name]; ok {
			return v, true
		}
		return os.LookupEnv(name)
	}
}
