package export

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/kbplatform/kbplatform/internal/report"
	"github.com/kbplatform/kbplatform/internal/report/reporttest"
)

func fixture(t *testing.T) []Row {
	st := reporttest.Open(t)
	reporttest.Put(t, st, "studyaaaaaaaaaaaaaaa", "cpu run", reporttest.CPUA, false, reporttest.StudyA())
	reporttest.PutCompileBaseline(t, st, "kbp/l1/relu", "compile-default", reporttest.CPUA, 0.8)
	s, err := report.Load(st, "studyaaa", report.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return Rows(s)
}

// Every format holds every attempt (and the evaluation no attempt names), and reads back.
func TestWriteFormats(t *testing.T) {
	rows := fixture(t)
	if len(rows) != len(reporttest.StudyA()) {
		t.Fatalf("rows: got %d, want %d", len(rows), len(reporttest.StudyA()))
	}
	var relu Row
	for _, r := range rows {
		if r.Kernel == reporttest.ReluFast {
			relu = r
		}
	}
	if relu.Verdict != "pass" || relu.Speedup != 1.6 || relu.SpeedupVsCompile != `{"compile-default":1.28}` || relu.Category != "pass" {
		t.Errorf("relu row: %+v", relu)
	}
	dir := t.TempDir()
	for _, format := range Formats {
		t.Run(format, func(t *testing.T) {
			path := filepath.Join(dir, "attempts."+format)
			if err := WriteFile(path, format, rows); err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
				t.Errorf("mode: %v %v", fi.Mode(), err)
			}
			var got []Row
			switch format {
			case "jsonl":
				f, err := os.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				sc := bufio.NewScanner(f)
				for sc.Scan() {
					var r Row
					if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
						t.Fatalf("line %d: %v", len(got)+1, err)
					}
					got = append(got, r)
				}
			case "csv":
				f, err := os.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				recs, err := csv.NewReader(f).ReadAll()
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(recs[0], Columns()) {
					t.Fatalf("header: %v", recs[0])
				}
				if len(recs)-1 != len(rows) {
					t.Fatalf("csv rows: got %d, want %d", len(recs)-1, len(rows))
				}
				col := map[string]int{}
				for i, c := range recs[0] {
					col[c] = i
				}
				for i, rec := range recs[1:] {
					if rec[col["task"]] != rows[i].Task || rec[col["verdict"]] != rows[i].Verdict || rec[col["kernel_hash"]] != rows[i].Kernel {
						t.Errorf("csv row %d: %v", i, rec)
					}
				}
				return
			case "parquet":
				var err error
				if got, err = parquet.ReadFile[Row](path); err != nil {
					t.Fatal(err)
				}
			}
			if !reflect.DeepEqual(got, rows) {
				t.Errorf("read back differs:\n got %+v\nwant %+v", got, rows)
			}
		})
	}
}

// An unknown format is an error that names the known ones, and leaves an earlier file alone.
func TestWriteFileBadFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out")
	if err := os.WriteFile(path, []byte("earlier"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := WriteFile(path, "xlsx", nil)
	if err == nil || !strings.Contains(err.Error(), "jsonl, csv, parquet") {
		t.Fatalf("got %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "earlier" {
		t.Errorf("earlier file changed: %q", b)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
}
