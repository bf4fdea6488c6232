package faults

import (
	"testing"

	"github.com/kbplatform/kbplatform/examples/kernels"
	"github.com/kbplatform/kbplatform/sdk"
)

func TestJudge(t *testing.T) {
	flag := func(name string) []sdk.Flag { return []sdk.Flag{{Name: name}} }
	cases := []struct {
		name string
		r    *sdk.Result
		want Outcome
	}{
		{"mismatch", &sdk.Result{Verdict: sdk.Fail, ErrorClass: sdk.ClassMismatch}, Caught},
		{"crash", &sdk.Result{Verdict: sdk.Fail, ErrorClass: sdk.ClassCrash}, Caught},
		{"rejected by static checks", &sdk.Result{Verdict: sdk.Fail, ErrorClass: sdk.ClassRejected}, Caught},
		{"pass with a kernel flag", &sdk.Result{Verdict: sdk.Pass, Flags: flag(sdk.FlagPrecisionDowncast)}, Caught},
		{"clean pass", &sdk.Result{Verdict: sdk.Pass}, Missed},
		{"pass with a measurement flag", &sdk.Result{Verdict: sdk.Pass, Flags: flag(sdk.FlagTimingUnresolved)}, Missed},
		{"does not build", &sdk.Result{Verdict: sdk.Fail, ErrorClass: sdk.ClassCompile}, Invalid},
		{"does not import", &sdk.Result{Verdict: sdk.Fail, ErrorClass: sdk.ClassLoad}, Invalid},
		{"platform", &sdk.Result{Verdict: sdk.VerdictError, ErrorClass: sdk.ClassHarness}, NoVerdict},
		{"nothing", nil, NoVerdict},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Judge(c.r); got != c.want {
				t.Errorf("got %s, want %s", got, c.want)
			}
		})
	}
}

func TestTally(t *testing.T) {
	cpp := kernels.Entry{File: "relu/cpp.py", Backend: "cpp"}
	tri := kernels.Entry{File: "relu/triton.py", Backend: "triton"}
	fs := []Finding{
		{Mutant: Mutant{Class: OffByOne, Origin: cpp}, Outcome: Caught},
		{Mutant: Mutant{Class: OffByOne, Origin: cpp}, Outcome: Missed},
		{Mutant: Mutant{Class: TailUnhandled, Origin: cpp}, Outcome: Caught},
		{Mutant: Mutant{Class: TailUnhandled, Origin: cpp}, Outcome: Invalid},
		{Mutant: Mutant{Class: OffByOne, Origin: tri}, Outcome: Unjudged},
	}
	rows := Tally(fs, []NotApplicable{{Class: MissingSync, Origin: cpp}})
	want := []Row{
		{Language: "cpp", Class: OffByOne, Mutants: 2, Caught: 1, Missed: 1},
		{Language: "cpp", Class: TailUnhandled, Mutants: 2, Caught: 1, Invalid: 1},
		{Language: "cpp", Class: MissingSync, NotApp: 1},
		{Language: "cpp", Mutants: 4, Caught: 2, Missed: 1, Invalid: 1, NotApp: 1},
		{Language: "triton", Class: OffByOne, Mutants: 1, Unjudged: 1},
		{Language: "triton", Mutants: 1, Unjudged: 1},
	}
	if len(rows) != len(want) {
		t.Fatalf("got %d rows, want %d: %+v", len(rows), len(want), rows)
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("row %d: got %+v, want %+v", i, rows[i], want[i])
		}
	}
	// The rate counts judged mutants only: 2 caught of 3 (the invalid one is no evidence).
	if rate, ok := rows[3].Rate(); !ok || rate != 2.0/3 {
		t.Errorf("cpp rate: got %v %v, want 0.667", rate, ok)
	}
	if _, ok := rows[5].Rate(); ok {
		t.Error("triton has no judged mutant, so no rate")
	}
	if got, want := rows[3].Summary(), "cpp: 4 mutants, 2 caught, 1 missed (66.7% caught); 1 invalid"; got != want {
		t.Errorf("summary: got %q, want %q", got, want)
	}
}
