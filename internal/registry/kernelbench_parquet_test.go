package registry

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// The dataset's parquet files give the same tasks (ids, hashes, metadata) as a checkout with the
// same files; level 4 is skipped and broken problems are reported, as for a checkout.
func TestImportKernelBenchParquet(t *testing.T) {
	conv := strings.Replace(okTask, "torch.relu", "torch.sigmoid", 1)
	checkout := t.TempDir()
	for rel, body := range map[string]string{"level1/19_ReLU.py": okTask, "level2/1_Conv2D_ReLU_BiasAdd.py": conv, "level3/1_MLP.py": okTask} {
		p := filepath.Join(checkout, "KernelBench", rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(t.TempDir(), "KernelBench")
	os.MkdirAll(filepath.Join(data, "data"), 0o755)
	write := func(name string, rows []kernelBenchRow) {
		if err := parquet.WriteFile(filepath.Join(data, "data", name), rows); err != nil {
			t.Fatal(err)
		}
	}
	// Names with and without ".py", with and without the problem id in front.
	write("level_1-00000-of-00001.parquet", []kernelBenchRow{
		{Code: okTask, Level: 1, Name: "19_ReLU.py", ProblemID: 19},
		{Code: "import torch\n", Level: 1, Name: "20_Broken.py", ProblemID: 20},
	})
	write("level_2-00000-of-00001.parquet", []kernelBenchRow{{Code: conv, Level: 2, Name: "Conv2D_ReLU_BiasAdd", ProblemID: 1}})
	write("level_3-00000-of-00001.parquet", []kernelBenchRow{{Code: okTask, Level: 0, Name: "1_MLP", ProblemID: 1}}) // level from the split
	write("level_4-00000-of-00001.parquet", []kernelBenchRow{{Code: okTask, Level: 4, Name: "1_gpt2.py", ProblemID: 1}})

	want, err := ImportKernelBench(checkout)
	if err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{data, filepath.Join(data, "data")} {
		got, err := ImportKernelBench(root)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Tasks) != len(want.Tasks) {
			t.Fatalf("%s: %d tasks, want %d", root, len(got.Tasks), len(want.Tasks))
		}
		for i, g := range got.Tasks {
			w := want.Tasks[i]
			if g.ID != w.ID || g.Hash != w.Hash || g.Origin != w.Origin || !reflect.DeepEqual(g.Meta, w.Meta) {
				t.Errorf("task %d: got %s %s %+v, want %s %s %+v", i, g.ID, g.Hash[:8], g.Meta, w.ID, w.Hash[:8], w.Meta)
			}
		}
		if !reflect.DeepEqual(got.PerLevel, want.PerLevel) {
			t.Errorf("per level: got %v, want %v", got.PerLevel, want.PerLevel)
		}
		if len(got.Skipped) != 1 || !strings.Contains(got.Skipped[0], "level4: 1 problems") {
			t.Errorf("skipped: %v", got.Skipped)
		}
		if len(got.Invalid) != 1 {
			t.Errorf("invalid: %v", got.Invalid)
		}
		for where, why := range got.Invalid {
			if !strings.Contains(where, "20_Broken") || !strings.Contains(why, "class Model") {
				t.Errorf("invalid %s: %s", where, why)
			}
		}
	}
	// One file alone, under another origin.
	one, err := ImportKernelBenchAs(filepath.Join(data, "data", "level_1-00000-of-00001.parquet"), "kb2")
	if err != nil {
		t.Fatal(err)
	}
	if len(one.Tasks) != 1 || one.Tasks[0].ID != "kb2/l1/19_ReLU" || one.Tasks[0].Meta.Name != "ReLU" {
		t.Errorf("one file: %+v", one.Tasks)
	}
	// A parquet file of another shape is a clear error.
	other := filepath.Join(t.TempDir(), "other.parquet")
	if err := parquet.WriteFile(other, []struct {
		Prompt string `parquet:"prompt"`
	}{{"x"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ImportKernelBench(other); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "no column code, name") {
		t.Errorf("a parquet file without KernelBench's columns: got %v", err)
	}
}
