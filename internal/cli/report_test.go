package cli

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/internal/report/reporttest"
	"github.com/kbplatform/kbplatform/internal/store"
)

// seedStudies writes the report fixtures into the isolated database.
func seedStudies(t *testing.T, env map[string]string) {
	t.Helper()
	st, err := store.Open(env["KBP_DB"])
	if err != nil {
		t.Fatal(err)
	}
	reporttest.Put(t, st, "studyaaaaaaaaaaaaaaa", "cpu run", reporttest.CPUA, false, reporttest.StudyA())
	reporttest.Put(t, st, "studybbbbbbbbbbbbbbb", "gpu rerun", reporttest.GPUB, true, reporttest.StudyB())
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestStudyReport(t *testing.T) {
	env := isolated(t)
	seedStudies(t, env)
	plots := filepath.Join(t.TempDir(), "plots")
	out, errOut, code := run(t, env, "study", "report", "studyaaa", "--plots", plots, "--p", "0,1,2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"fast_0  fast_1  fast_2  GEOMEAN", "0.75    0.75    0.25    1.82x", "by level", "fast_p@N"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	for _, name := range []string{"fastp.png", "fastp.svg", "fastp_turns.png", "speedup_levels.svg"} {
		if fi, err := os.Stat(filepath.Join(plots, name)); err != nil || fi.Size() == 0 {
			t.Errorf("plot %s: %v", name, err)
		}
	}
	out, errOut, code = run(t, env, "study", "report", "--compare", "studyaaa,studybbb")
	if code != 0 || !strings.Contains(out, "passes on A only") || !strings.Contains(out, "3 of 7 kernels flip") {
		t.Errorf("compare: exit %d %s\n%s", code, errOut, out)
	}
	for _, bad := range [][]string{
		{"study", "report", "studyaaa", "--baseline", "fast"},
		{"study", "report", "studyaaa", "--p", "x"},
		{"study", "report", "--compare", "studyaaa"}, // one machine only
		{"study", "report", "nosuchstudy"},
		{"study", "report"},
	} {
		if _, _, code := run(t, env, bad...); code == 0 {
			t.Errorf("%v: want an error", bad)
		}
	}
}

func TestStudyExport(t *testing.T) {
	env := isolated(t)
	seedStudies(t, env)
	dir := t.TempDir()
	for _, format := range []string{"jsonl", "csv", "parquet"} {
		path := filepath.Join(dir, "a."+format)
		if _, errOut, code := run(t, env, "study", "export", "studyaaa", "--format", format, "--out", path); code != 0 {
			t.Fatalf("%s: exit %d: %s", format, code, errOut)
		}
		b, err := os.ReadFile(path)
		if err != nil || len(b) == 0 {
			t.Fatalf("%s: %v", format, err)
		}
		switch format {
		case "jsonl":
			if n := bytes.Count(b, []byte("\n")); n != len(reporttest.StudyA()) {
				t.Errorf("jsonl: %d lines, want %d", n, len(reporttest.StudyA()))
			}
		case "csv":
			recs, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
			if err != nil || len(recs) != len(reporttest.StudyA())+1 {
				t.Errorf("csv: %d records, %v", len(recs), err)
			}
		case "parquet":
			if !bytes.HasPrefix(b, []byte("PAR1")) {
				t.Errorf("parquet: no magic")
			}
		}
	}
	out, _, code := run(t, env, "study", "export", "studybbb", "--format", "csv")
	if code != 0 || !strings.HasPrefix(out, "study,study_name,attempt_id,task") {
		t.Errorf("csv to stdout: %d %q", code, out[:min(80, len(out))])
	}
	if _, errOut, code := run(t, env, "study", "export", "studyaaa", "--format", "xlsx"); code == 0 || !strings.Contains(errOut, "jsonl, csv, parquet") {
		t.Errorf("unknown format: %d %s", code, errOut)
	}
}
