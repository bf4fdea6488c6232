package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/internal/study"
)

func TestBackendRefs(t *testing.T) {
	cases := []struct {
		name    string
		setting pluginSetting
		cfg     string
		want    []string // ref=config
		err     string
	}{
		{"default", pluginSetting{}, "", []string{"backend/cpp="}, ""},
		{"one with its settings", pluginSetting{Name: "cutlass"}, `{"cutlass_path": "/c"}`, []string{`backend/cutlass={"cutlass_path": "/c"}`}, ""},
		{"several, settings by name", pluginSetting{Name: "cuda, triton,cutlass"}, `{"cutlass": {"cutlass_path": "/c"}}`,
			[]string{"backend/cuda=", "backend/triton=", `backend/cutlass={"cutlass_path": "/c"}`}, ""},
		{"several, settings from a study file", pluginSetting{Name: "cuda,cutlass", Config: map[string]any{"cutlass": map[string]any{"cutlass_path": "/c"}}}, "",
			[]string{"backend/cuda=", `backend/cutlass={"cutlass_path":"/c"}`}, ""},
		{"settings for a backend not named", pluginSetting{Name: "cuda,triton"}, `{"cutlass": {}}`, nil, "not among the backends"},
		{"flat settings with several backends", pluginSetting{Name: "cuda,triton"}, `{"python": 3}`, nil, "object by backend name"},
		{"a backend twice", pluginSetting{Name: "cuda,backend/cuda"}, "", nil, "named twice"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var cfg json.RawMessage
			if c.cfg != "" {
				cfg = json.RawMessage(c.cfg)
			}
			refs, err := backendRefs(c.setting, cfg)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %v, want an error saying %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range refs {
				got = append(got, r.Ref+"="+string(r.Config))
			}
			if strings.Join(got, " ") != strings.Join(c.want, " ") {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestRenderComparison(t *testing.T) {
	rep := func(id, backend string, outs ...study.TaskOutcome) *study.Report {
		return &study.Report{Study: id, Spec: study.Spec{Backend: study.PluginRef{Ref: "backend/" + backend}}, Outcomes: outs}
	}
	var b bytes.Buffer
	renderComparison(&b, []*study.Report{
		rep("aaaaaaaaaaaa", "cuda", study.TaskOutcome{Task: "t1", Done: true, Correct: true, BestSpeedup: 1.5}, study.TaskOutcome{Task: "t2", Done: true}),
		rep("bbbbbbbbbbbb", "triton", study.TaskOutcome{Task: "t1", Done: true, Error: "boom"}, study.TaskOutcome{Task: "t2"}),
	})
	for _, want := range []string{"TASK  CUDA       TRITON", "t1    1.50x      error", "t2    incorrect  not run", "fast_0  0.50", "cuda: study aaaaaaaaaaaa"} {
		if !strings.Contains(strings.Join(strings.Fields(b.String()), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("no %q in\n%s", want, b.String())
		}
	}
}
