package registry

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ImportReport says what an import found.
type ImportReport struct {
	Root     string            `json:"root"`
	Tasks    []*Task           `json:"-"`
	Invalid  map[string]string `json:"invalid,omitempty"` // file -> reason
	Skipped  []string          `json:"skipped,omitempty"` // reasons, one per skipped group
	PerLevel map[int]int       `json:"per_level"`
}

// kernelBenchLevels are the folders of a KernelBench checkout, in order.
var kernelBenchLevels = []int{1, 2, 3, 4}

// ImportKernelBench reads a KernelBench checkout (the repository root, or its KernelBench/
// folder) as tasks of origin `kernelbench` (ids kernelbench/lN/NAME). Level 4 (Hugging Face
// models that download weights) is skipped with a message. Files are read, never copied into the
// project; the caller stores their source.
func ImportKernelBench(root string) (*ImportReport, error) {
	return ImportKernelBenchAs(root, OriginKernelBench)
}

// ImportKernelBenchAs is ImportKernelBench under another origin: ids origin/lN/NAME, so that a
// second checkout (a fork, another revision) can sit beside the first. root may also be the
// published dataset's parquet files (one file, or a folder of them, data/ included): the same
// problems give the same tasks.
func ImportKernelBenchAs(root, origin string) (*ImportReport, error) {
	if origin == "" || strings.ContainsAny(origin, "/ \t") || origin == OriginSuite || origin == OriginFile {
		return nil, fmt.Errorf("%w: origin %q: one word without slashes, not suite or file", ErrInvalid, origin)
	}
	if files, ok, err := kernelBenchParquet(root); err != nil {
		return nil, err
	} else if ok {
		return importKernelBenchParquet(root, files, origin)
	}
	base := root
	if st, err := os.Stat(filepath.Join(root, "KernelBench")); err == nil && st.IsDir() {
		base = filepath.Join(root, "KernelBench")
	}
	rep := &ImportReport{Root: base, Invalid: map[string]string{}, PerLevel: map[int]int{}}
	found := false
	for _, level := range kernelBenchLevels {
		dir := filepath.Join(base, fmt.Sprintf("level%d", level))
		entries, err := os.ReadDir(dir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		found = true
		var files []string
		for _, e := range entries {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".py") {
				files = append(files, e.Name())
			}
		}
		sort.Strings(files)
		if level == 4 {
			if len(files) > 0 {
				rep.Skipped = append(rep.Skipped, fmt.Sprintf("level4: %d files skipped: they build Hugging Face models whose weights and configs are downloaded at run time, which needs the `transformers` package and network access", len(files)))
			}
			continue
		}
		for _, name := range files {
			p := filepath.Join(dir, name)
			src, err := os.ReadFile(p)
			if err != nil {
				rep.Invalid[p] = err.Error()
				continue
			}
			stem := strings.TrimSuffix(name, ".py")
			t, err := New(fmt.Sprintf("%s/l%d/%s", origin, level, stem), origin, p, string(src), Meta{Name: kernelBenchName(stem), Level: level, Tags: []string{"kernelbench"}})
			if err != nil {
				rep.Invalid[p] = err.Error()
				continue
			}
			rep.Tasks = append(rep.Tasks, t)
			rep.PerLevel[level]++
		}
	}
	if !found {
		return nil, fmt.Errorf("%w: %s has no KernelBench/level1..level4 folders", ErrInvalid, root)
	}
	return rep, nil
}

// kernelBenchName turns "19_ReLU" into "ReLU".
func kernelBenchName(stem string) string {
	if i := strings.IndexByte(stem, '_'); i > 0 {
		if _, err := fmt.Sscanf(stem[:i], "%d", new(int)); err == nil {
			return strings.ReplaceAll(stem[i+1:], "_", " ")
		}
	}
	return stem
}
