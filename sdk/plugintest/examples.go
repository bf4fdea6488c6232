package plugintest

import (
	"context"
	"encoding/json"
	"io/fs"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/sdk"
	"github.com/kbplatform/kbplatform/sdk/extract"
)

// RunExampleChecks holds a backend's worked examples to its own rules: in every prompt file under
// files (*.md), each Python block that defines Model followed by one that defines ModelNew is a
// task and its answer; the answer must pass the backend's Check without a rejection or a flag.
// An example that breaks the backend's own rules would teach the model to break them.
func RunExampleChecks(t *testing.T, impl sdk.Backend, config json.RawMessage, files fs.FS) {
	r := Connect(t, impl)
	ctx := context.Background()
	if err := r.Configure(ctx, config, nil); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	names, err := fs.Glob(files, "*.md")
	if err != nil {
		t.Fatal(err)
	}
	pairs := 0
	for _, name := range names {
		b, err := fs.ReadFile(files, name)
		if err != nil {
			t.Fatal(err)
		}
		blocks := strings.Split(string(b), "```python\n")
		var task string
		for i, blk := range blocks[1:] {
			code := blk[:strings.Index(blk+"```", "```")]
			if _, err := extract.Source("```python\n" + code + "```"); err != nil {
				task = code
				continue
			}
			if task == "" {
				t.Errorf("%s: block %d defines ModelNew without a Model before it", name, i+1)
				continue
			}
			pairs++
			issues, err := r.Backend().Check(ctx, code, sdk.Task{ID: name, Source: task})
			if err != nil {
				t.Fatalf("%s: Check: %v", name, err)
			}
			for _, is := range issues {
				if is.Severity == sdk.SeverityError || is.Flag != "" {
					t.Errorf("%s, example %d: %s %s (flag %q): %s", name, pairs, is.Severity, is.Code, is.Flag, is.Message)
				}
			}
			task = ""
		}
	}
	if pairs == 0 {
		t.Error("no worked example (a Model block followed by a ModelNew block) in the prompt files")
	}
}
