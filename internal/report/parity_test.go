package report

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/kbplatform/kbplatform/internal/metrics"
	"github.com/kbplatform/kbplatform/internal/report/reporttest"
	"github.com/kbplatform/kbplatform/internal/study"
)

// `study show` (study.FastP over study.Summarize) and `study report` (metrics.FastP over the
// loaded rows) must agree on the same records: one rule for who counts, in two shapes.
func TestFastPMatchesStudyShow(t *testing.T) {
	st := reporttest.Open(t)
	reporttest.Put(t, st, "studyaaaaaaaaaaaaaaa", "cpu run", reporttest.CPUA, false, reporttest.StudyA())
	for _, flags := range [][]string{nil, {"torch_delegation"}} {
		s, err := st.Study("studyaaaaaaaaaaaaaaa")
		if err != nil {
			t.Fatal(err)
		}
		var spec study.Spec
		if err := json.Unmarshal(s.Spec, &spec); err != nil {
			t.Fatal(err)
		}
		rep := study.EmptyReport(s.ID, spec)
		rep.ExcludeFlags = flags
		if err := study.Summarize(st, rep); err != nil {
			t.Fatal(err)
		}
		loaded, err := Load(st, s.ID, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		units := metrics.Units(loaded.Rows())
		for _, p := range metrics.DefaultP {
			for _, counting := range []bool{false, true} {
				o := metrics.Options{ExcludeFlags: flags, CountFlagged: counting}
				got := metrics.FastP(units, p, o)
				want := study.FastP(rep.Outcomes, p, counting)
				if math.Abs(got.Value-want) > 1e-12 || got.N != study.Judged(rep.Outcomes) {
					t.Errorf("flags %v fast_%v (counting flagged %v): report %v over %d, study show %v over %d", flags, p, counting, got.Value, got.N, want, study.Judged(rep.Outcomes))
				}
			}
		}
	}
}
