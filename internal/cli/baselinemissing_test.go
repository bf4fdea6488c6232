package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/internal/contract"
	"github.com/kbplatform/kbplatform/internal/registry"
	"github.com/kbplatform/kbplatform/internal/store"
	"github.com/kbplatform/kbplatform/sdk"
)

// A baseline run cut short resumes with --missing: what has a stored verdict on this platform is
// not timed again, the rest is, and a run with nothing left times nothing.
func TestBaselineMissingResumes(t *testing.T) {
	env := isolated(t)
	flags := []string{"--modes", "eager", "--device", "cpu", "--seeds", "1", "--timed-calls", "5", "--warmup", "1", "--check-calls", "1", "--json"}
	timed := func(args ...string) ([]store.Baseline, string) {
		t.Helper()
		out, errOut, code := run(t, env, append(append([]string{"baseline"}, args...), flags...)...)
		if code != 0 {
			t.Fatalf("baseline %v: exit %d\n%s\n%s", args, code, out, errOut)
		}
		var list []store.Baseline
		if err := json.Unmarshal([]byte(out), &list); err != nil || list == nil {
			t.Fatalf("baseline %v --json: %v\n%s", args, err, out)
		}
		return list, errOut
	}
	first, _ := timed("--task", "kbp/l1/relu")
	if len(first) != 1 || first[0].Verdict != sdk.Pass {
		t.Fatalf("first run: %+v", first)
	}
	// The stored fingerprint carries what --missing compares with the target's description.
	if m, _ := first[0].Fingerprint["cpu_model"].(string); m == "" || first[0].Fingerprint["torch"] == nil {
		t.Fatalf("stored fingerprint lacks the CPU model or torch: %v", first[0].Fingerprint)
	}

	second, errOut := timed("--task", "kbp/l1/relu", "--task", "kbp/l1/softmax", "--missing")
	if len(second) != 1 || second[0].TaskID != "kbp/l1/softmax" {
		t.Fatalf("--missing timed %+v, want only kbp/l1/softmax", second)
	}
	if !strings.Contains(errOut, "1 of 2 already timed on this platform under "+contract.Version+"; timing 1") {
		t.Errorf("--missing does not say what it skipped:\n%s", errOut)
	}

	third, errOut := timed("--task", "kbp/l1/relu", "--task", "kbp/l1/softmax", "--missing")
	if len(third) != 0 || !strings.Contains(errOut, "2 of 2 already timed") {
		t.Fatalf("nothing left: timed %+v\n%s", third, errOut)
	}
	// Without --missing everything is timed again (a new measurement replaces the stored one).
	again, _ := timed("--task", "kbp/l1/relu")
	if len(again) != 1 || again[0].Evaluation == first[0].Evaluation {
		t.Fatalf("without --missing the pair is timed again: %+v", again)
	}
}

// What counts as already timed: a verdict for the same task source, size, mode and contract, on a
// device of the same model and driver with the same torch. Anything else is timed again.
func TestBaselineMissingMatches(t *testing.T) {
	it := baselineItem{task: &registry.Task{ID: "t"}, size: "gpu", ct: sdk.Task{Hash: "h1"}, mode: "eager"}
	p := platformID{model: "NVIDIA H200", driver: "580.159.04", torch: "2.11.0"}
	good := store.Baseline{TaskID: "t", TaskHash: "h1", Size: "gpu", Mode: "eager", Verdict: sdk.Pass, Contract: contract.Version,
		Fingerprint: sdk.Fingerprint{"device": "cuda:0", "device_name": "NVIDIA H200", "driver": "580.159.04", "torch": "2.11.0"}}
	if !timedBefore([]store.Baseline{good}, it, p) {
		t.Fatal("an identical stored baseline is not recognised")
	}
	failed := good
	failed.Verdict = sdk.Fail // the mode computes something else: a verdict, not to be retaken
	if !timedBefore([]store.Baseline{failed}, it, p) {
		t.Error("a stored fail is a verdict")
	}
	fp := func(k, v string) sdk.Fingerprint {
		f := sdk.Fingerprint{}
		for key, val := range good.Fingerprint {
			f[key] = val
		}
		f[k] = v
		return f
	}
	other := map[string]func(b *store.Baseline){
		"no verdict (out of memory)": func(b *store.Baseline) { b.Verdict = sdk.VerdictError },
		"another contract":           func(b *store.Baseline) { b.Contract = "kbp-contract/10" },
		"an edited task":             func(b *store.Baseline) { b.TaskHash = "h2" },
		"another size":               func(b *store.Baseline) { b.Size = "default" },
		"another mode":               func(b *store.Baseline) { b.Mode = "max-autotune" },
		"another GPU":                func(b *store.Baseline) { b.Fingerprint = fp("device_name", "NVIDIA H100 80GB HBM3") },
		"another driver":             func(b *store.Baseline) { b.Fingerprint = fp("driver", "570.86.15") },
		"another torch":              func(b *store.Baseline) { b.Fingerprint = fp("torch", "2.10.0") },
	}
	for name, change := range other {
		b := good
		change(&b)
		if timedBefore([]store.Baseline{b}, it, p) {
			t.Errorf("%s counted as already timed", name)
		}
	}
	// A driver only one side knows does not tell platforms apart.
	b := good
	b.Fingerprint = fp("driver", "")
	if !timedBefore([]store.Baseline{b}, it, p) {
		t.Error("a fingerprint without a driver should match on model and torch")
	}

	// A target that does not describe its platform: nothing can be matched.
	for _, hw := range []*sdk.Hardware{nil, {Devices: []sdk.Device{{Name: "cuda:0", Model: "NVIDIA H200"}}}, {Fingerprint: sdk.Fingerprint{"torch": "2.11.0"}}} {
		if _, why := platformOf(hw, "cuda:0"); why == "" {
			t.Errorf("platformOf(%+v) found a platform", hw)
		}
	}
	hw := &sdk.Hardware{Fingerprint: sdk.Fingerprint{"torch": "2.11.0"}, Devices: []sdk.Device{{Name: "cpu", Model: "EPYC"}, {Name: "cuda:0", Model: "NVIDIA H200", Driver: "580.159.04"}}}
	if got, why := platformOf(hw, "cuda:0"); why != "" || got != p {
		t.Errorf("platformOf: %+v %q, want %+v", got, why, p)
	}
}
