// Package export writes a study's attempts as JSON lines, CSV or Parquet: one row per attempt,
// flat columns, for analysis outside kbplatform (pandas, DuckDB, a spreadsheet).
package export

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/kbplatform/kbplatform/internal/metrics"
	"github.com/kbplatform/kbplatform/internal/report"
)

// Formats are the formats Write knows.
var Formats = []string{"jsonl", "csv", "parquet"}

// Row is one attempt. The parquet tags name the columns of CSV and Parquet; JSON lines use the
// same names.
type Row struct {
	Study            string  `json:"study" parquet:"study"`
	StudyName        string  `json:"study_name" parquet:"study_name"`
	Attempt          string  `json:"attempt_id" parquet:"attempt_id"` // empty: an evaluation no attempt names
	Task             string  `json:"task" parquet:"task"`
	Level            int64   `json:"level" parquet:"level"`
	Model            string  `json:"model" parquet:"model"`
	Backend          string  `json:"backend" parquet:"backend"`
	Strategy         string  `json:"strategy" parquet:"strategy"`
	Target           string  `json:"target" parquet:"target"`
	Seed             int64   `json:"seed" parquet:"seed"`
	Step             int64   `json:"step" parquet:"step"`
	ParentStep       int64   `json:"parent_step" parquet:"parent_step"`
	Turn             int64   `json:"turn" parquet:"turn"`
	Sample           int64   `json:"sample" parquet:"sample"`
	Evaluation       string  `json:"evaluation_id" parquet:"evaluation_id"`
	Kernel           string  `json:"kernel_hash" parquet:"kernel_hash"`
	Verdict          string  `json:"verdict" parquet:"verdict"`
	ErrorClass       string  `json:"error_class" parquet:"error_class"`
	Category         string  `json:"category" parquet:"category"` // metrics.Category, no flags excluded
	Blame            string  `json:"blame" parquet:"blame"`
	Flags            string  `json:"flags" parquet:"flags"` // comma-separated
	Speedup          float64 `json:"speedup" parquet:"speedup"`
	CandidateMS      float64 `json:"candidate_median_ms" parquet:"candidate_median_ms"`
	EagerMS          float64 `json:"eager_median_ms" parquet:"eager_median_ms"`
	SpeedupVsCompile string  `json:"speedup_vs_compile" parquet:"speedup_vs_compile"` // JSON object: mode → speedup, same hardware only
	Hardware         string  `json:"hardware" parquet:"hardware"`
	Platform         string  `json:"platform" parquet:"platform"`
	Failure          string  `json:"failure" parquet:"failure"`
	FeedbackKind     string  `json:"feedback_kind" parquet:"feedback_kind"`
	PromptTokens     int64   `json:"prompt_tokens" parquet:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens" parquet:"completion_tokens"`
	Temperature      float64 `json:"temperature" parquet:"temperature"`
	Message          string  `json:"message" parquet:"message"`
	At               string  `json:"at" parquet:"at"` // RFC 3339, UTC
}

// Rows flattens a loaded study.
func Rows(s *report.Study) []Row {
	out := make([]Row, 0, len(s.Attempts))
	for _, a := range s.Attempts {
		r := Row{Study: a.Study, StudyName: a.StudyName, Attempt: a.ID, Task: a.Task, Level: int64(a.Level), Model: a.Model,
			Backend: a.Backend, Strategy: a.Strategy, Target: a.Target, Seed: a.Seed, Step: int64(a.Step), ParentStep: int64(a.ParentStep),
			Turn: int64(a.Turn), Sample: int64(a.Sample), Evaluation: a.Evaluation, Kernel: a.Kernel, Verdict: a.Verdict,
			ErrorClass: a.Class, Category: metrics.Category(a.Row, metrics.Options{}), Blame: a.Blame, Flags: strings.Join(a.Flags, ","), Speedup: a.Speedup,
			CandidateMS: a.CandidateMS, EagerMS: a.EagerMS, Hardware: a.Hardware, Platform: a.Platform, Failure: a.Failure,
			FeedbackKind: a.FeedbackKind, PromptTokens: a.PromptTokens, CompletionTokens: a.CompletionTokens,
			Temperature: a.Temperature, Message: a.Message}
		if !a.At.IsZero() {
			r.At = a.At.UTC().Format(time.RFC3339Nano)
		}
		if len(a.Versus) > 0 {
			b, _ := json.Marshal(a.Versus) // keys sorted: stable output
			r.SpeedupVsCompile = string(b)
		}
		out = append(out, r)
	}
	return out
}

// Write writes rows in a format.
func Write(w io.Writer, format string, rows []Row) error {
	switch format {
	case "jsonl":
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	case "csv":
		return writeCSV(w, rows)
	case "parquet":
		return parquet.Write(w, rows)
	}
	return fmt.Errorf("unknown export format %q (known: %s)", format, strings.Join(Formats, ", "))
}

// WriteFile writes rows to path through a temporary file, so a failed export leaves no partial
// file behind and an earlier export at path untouched.
func WriteFile(path, format string, rows []Row) error {
	if !contains(Formats, format) {
		return fmt.Errorf("unknown export format %q (known: %s)", format, strings.Join(Formats, ", "))
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename there is nothing to remove
	// CreateTemp makes the file private; an export is an ordinary, readable file.
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := Write(f, format, rows); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Columns are the export's column names, in order.
func Columns() []string {
	t := reflect.TypeFor[Row]()
	out := make([]string, t.NumField())
	for i := range out {
		out[i], _, _ = strings.Cut(t.Field(i).Tag.Get("parquet"), ",")
	}
	return out
}

func writeCSV(w io.Writer, rows []Row) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(Columns()); err != nil {
		return err
	}
	rec := make([]string, len(Columns()))
	for _, r := range rows {
		v := reflect.ValueOf(r)
		for i := range rec {
			f := v.Field(i)
			switch f.Kind() {
			case reflect.String:
				rec[i] = f.String()
			case reflect.Int64:
				rec[i] = strconv.FormatInt(f.Int(), 10)
			case reflect.Float64:
				rec[i] = strconv.FormatFloat(f.Float(), 'g', -1, 64)
			default:
				return fmt.Errorf("export: column %s has no CSV form", Columns()[i])
			}
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
