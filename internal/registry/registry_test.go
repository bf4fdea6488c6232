package registry

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/kbplatform/kbplatform/tasks"
)

func TestSuiteLoads(t *testing.T) {
	list, err := LoadSuite(tasks.FS)
	if err != nil {
		t.Fatalf("suite does not load: %v", err)
	}
	perLevel := map[int]int{}
	for _, task := range list {
		perLevel[task.Meta.Level]++
		for _, size := range []string{"cpu", "gpu"} {
			if !task.HasSize(size) {
				t.Errorf("%s has no %s size", task.ID, size)
				continue
			}
			src, err := task.Render(size)
			if err != nil {
				t.Errorf("%s: %v", task.ID, err)
			}
			if err := CheckSource(task.ID, src); err != nil {
				t.Errorf("%s rendered at %s: %v", task.ID, size, err)
			}
		}
		// The file as written is the gpu size.
		gpu, _ := task.Render("gpu")
		if gpu != task.Source {
			t.Errorf("%s: the file's literals are not its gpu size", task.ID)
		}
	}
	if len(list) < 30 {
		t.Errorf("suite has %d tasks, want at least 30", len(list))
	}
	for level := 1; level <= 3; level++ {
		if perLevel[level] == 0 {
			t.Errorf("no level %d tasks", level)
		}
	}
}

const okTask = `import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return x * 2

batch_size = 128
dim = 4096
shape = (1, 2)

def get_inputs():
    return [torch.randn(batch_size, dim)]

def get_init_inputs():
    return []
`

func TestRender(t *testing.T) {
	task, err := New("x/ok", OriginFile, "ok.py", okTask, Meta{Sizes: map[string]map[string]any{
		"cpu": {"batch_size": 4, "dim": 8, "shape": []any{3, 4.5}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := task.Render("cpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"batch_size = 4\n", "dim = 8\n", "shape = (3, 4.5)\n", "return [torch.randn(batch_size, dim)]"} {
		if !strings.Contains(got, want) {
			t.Errorf("rendered source lacks %q:\n%s", want, got)
		}
	}
	if _, err := task.Render("gpu"); !errors.Is(err, ErrInvalid) {
		t.Errorf("unknown size: got %v, want ErrInvalid", err)
	}
	if s := task.PickSize("auto", "cuda:0"); s != DefaultSize {
		t.Errorf("auto on cuda without gpu size: got %s", s)
	}
	if s := task.PickSize("auto", "cpu"); s != "cpu" {
		t.Errorf("auto on cpu: got %s", s)
	}
}

func TestInvalidTasks(t *testing.T) {
	cases := []struct {
		name string
		src  string
		meta Meta
		want string
	}{
		{"no model", strings.Replace(okTask, "class Model", "class Other", 1), Meta{}, "class Model"},
		{"no inputs", strings.Replace(okTask, "def get_inputs", "def inputs", 1), Meta{}, "get_inputs"},
		{"no init", strings.Replace(okTask, "def get_init_inputs", "def init_inputs", 1), Meta{}, "get_init_inputs"},
		{"unknown constant", okTask, Meta{Sizes: map[string]map[string]any{"cpu": {"depth": 3}}}, "depth"},
		{"unknown dist", okTask, Meta{Distributions: []string{"gaussian"}}, "gaussian"},
		{"reserved size", okTask, Meta{Sizes: map[string]map[string]any{"default": {"dim": 3}}}, "reserved"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := New("x/bad", OriginFile, "bad.py", c.src, c.meta)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "bad.py") {
				t.Fatalf("got %v, want ErrInvalid naming bad.py and %q", err, c.want)
			}
		})
	}
}

func TestLoadSuiteReportsBadFiles(t *testing.T) {
	fsys := fstest.MapFS{
		"level1/good.py":   {Data: []byte(okTask)},
		"level1/good.yaml": {Data: []byte("name: Good\nlevel: 1\nsizes:\n  cpu: {dim: 8}\n")},
		"level1/nometa.py": {Data: []byte(okTask)},
		"level2/typo.py":   {Data: []byte(okTask)},
		"level2/typo.yaml": {Data: []byte("name: Typo\nlevle: 2\n")},
	}
	list, err := LoadSuite(fsys)
	if len(list) != 1 || list[0].ID != "kbp/l1/good" {
		t.Fatalf("got %d tasks", len(list))
	}
	if err == nil || !strings.Contains(err.Error(), "nometa") || !strings.Contains(err.Error(), "levle") {
		t.Fatalf("errors should name both bad files: %v", err)
	}
}

func TestImportKernelBench(t *testing.T) {
	root := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(root, "KernelBench", rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("level1/19_ReLU.py", okTask)
	write("level1/20_Broken.py", "import torch\n")
	write("level2/1_Conv2D_ReLU_BiasAdd.py", okTask)
	write("level3/1_MLP.py", okTask)
	write("level4/1_gpt2.py", okTask)
	rep, err := ImportKernelBench(root)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, task := range rep.Tasks {
		ids = append(ids, task.ID)
	}
	want := "kernelbench/l1/19_ReLU kernelbench/l2/1_Conv2D_ReLU_BiasAdd kernelbench/l3/1_MLP"
	if got := strings.Join(ids, " "); got != want {
		t.Errorf("ids: got %s, want %s", got, want)
	}
	if len(rep.Invalid) != 1 {
		t.Errorf("invalid: %v", rep.Invalid)
	}
	for p, why := range rep.Invalid {
		if !strings.Contains(p, "20_Broken.py") || !strings.Contains(why, "class Model") {
			t.Errorf("invalid entry %s: %s", p, why)
		}
	}
	if len(rep.Skipped) != 1 || !strings.Contains(rep.Skipped[0], "level4") {
		t.Errorf("skipped: %v", rep.Skipped)
	}
	if rep.Tasks[0].Meta.Name != "ReLU" {
		t.Errorf("name: %q", rep.Tasks[0].Meta.Name)
	}
	if _, err := ImportKernelBench(t.TempDir()); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty folder: %v", err)
	}
}
