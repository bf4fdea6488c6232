package registry

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"
)

// kernelBenchRow is one problem of KernelBench's published dataset (ScalingIntelligence/KernelBench
// on Hugging Face): one parquet file per level split (data/level_1-00000-of-00001.parquet), with
// the columns code, level, name and problem_id.
type kernelBenchRow struct {
	Code      string `parquet:"code"`
	Level     int64  `parquet:"level"`
	Name      string `parquet:"name"`
	ProblemID int64  `parquet:"problem_id"`
}

var (
	reSplitLevel = regexp.MustCompile(`level_?(\d+)`)
	reNumbered   = regexp.MustCompile(`^\d+_`)
)

// kernelBenchParquet lists the dataset's parquet files under root: root itself when it is a
// parquet file, else the *.parquet files in root and in root/data. ok is false when root is not
// the dataset (a checkout has level folders, and no parquet files).
func kernelBenchParquet(root string) (files []string, ok bool, err error) {
	st, err := os.Stat(root)
	if err != nil {
		return nil, false, err
	}
	if !st.IsDir() {
		return []string{root}, strings.HasSuffix(root, ".parquet"), nil
	}
	for _, d := range []string{"KernelBench", "level1", "level2", "level3"} {
		if fi, err := os.Stat(filepath.Join(root, d)); err == nil && fi.IsDir() {
			return nil, false, nil // a checkout
		}
	}
	for _, dir := range []string{root, filepath.Join(root, "data")} {
		m, err := filepath.Glob(filepath.Join(dir, "*.parquet"))
		if err != nil {
			return nil, false, err
		}
		files = append(files, m...)
	}
	sort.Strings(files)
	return files, len(files) > 0, nil
}

// importKernelBenchParquet reads the dataset's parquet files into the same tasks a checkout of
// the same revision gives: id origin/lLEVEL/STEM and metadata from the stem, where STEM is the
// checkout's file name (the dataset's name column, with the problem id in front when the name
// lacks it).
func importKernelBenchParquet(root string, files []string, origin string) (*ImportReport, error) {
	rep := &ImportReport{Root: root, Invalid: map[string]string{}, PerLevel: map[int]int{}}
	seen := map[string]*Task{}
	skipped := map[int]int{}
	for _, file := range files {
		rows, err := readKernelBenchParquet(file)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: not KernelBench's parquet (columns code, level, name, problem_id): %v", ErrInvalid, file, err)
		}
		split := 0
		if m := reSplitLevel.FindStringSubmatch(filepath.Base(file)); m != nil {
			split, _ = strconv.Atoi(m[1])
		}
		for i, row := range rows {
			level := int(row.Level)
			if level == 0 {
				level = split
			}
			stem := strings.TrimSuffix(strings.TrimSpace(row.Name), ".py")
			if stem != "" && !reNumbered.MatchString(stem) && row.ProblemID > 0 {
				stem = fmt.Sprintf("%d_%s", row.ProblemID, stem)
			}
			where := fmt.Sprintf("%s row %d", file, i)
			if stem != "" {
				where += " (" + stem + ")"
			}
			switch {
			case stem == "" || strings.ContainsAny(stem, "/\\"):
				rep.Invalid[where] = fmt.Sprintf("name %q is not a task file name", row.Name)
				continue
			case level == 4:
				skipped[4]++
				continue
			case level < 1 || level > 4:
				rep.Invalid[where] = fmt.Sprintf("level %d: KernelBench has levels 1 to 4", level)
				continue
			}
			id := fmt.Sprintf("%s/l%d/%s", origin, level, stem)
			t, err := New(id, origin, file+"#"+stem+".py", row.Code,
				Meta{Name: kernelBenchName(stem), Level: level, Tags: []string{"kernelbench"}})
			if err != nil {
				rep.Invalid[where] = err.Error()
				continue
			}
			if old, ok := seen[id]; ok {
				if old.Hash != t.Hash {
					rep.Invalid[where] = fmt.Sprintf("%s appears twice with different code (first in %s)", id, old.Path)
				}
				continue
			}
			seen[id] = t
			rep.Tasks = append(rep.Tasks, t)
			rep.PerLevel[level]++
		}
	}
	if n := skipped[4]; n > 0 {
		rep.Skipped = append(rep.Skipped, fmt.Sprintf("level4: %d problems skipped: they build Hugging Face models whose weights and configs are downloaded at run time, which needs the `transformers` package and network access", n))
	}
	if len(rep.Tasks) == 0 && len(rep.Invalid) == 0 && len(rep.Skipped) == 0 {
		return nil, errors.Join(ErrInvalid, fmt.Errorf("%s holds no KernelBench problems", root))
	}
	sort.Slice(rep.Tasks, func(i, j int) bool { return rep.Tasks[i].ID < rep.Tasks[j].ID })
	return rep, nil
}

// readKernelBenchParquet reads a file's rows after checking it has the dataset's columns: a
// reader fills missing columns with zero values, which would pass for empty problems.
func readKernelBenchParquet(file string) ([]kernelBenchRow, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	pf, err := parquet.OpenFile(f, fi.Size())
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, col := range []string{"code", "name"} {
		if _, ok := pf.Schema().Lookup(col); !ok {
			missing = append(missing, col)
		}
	}
	if _, ok := pf.Schema().Lookup("level"); !ok {
		if _, ok := pf.Schema().Lookup("problem_id"); !ok {
			missing = append(missing, "level or problem_id")
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("no column %s", strings.Join(missing, ", "))
	}
	return parquet.Read[kernelBenchRow](f, fi.Size())
}
