package metrics

// Categories of an attempt's outcome, in the order reports show them.
const (
	CatPass       = "pass"
	CatCompile    = "compile"
	CatRuntime    = "runtime"
	CatMismatch   = "mismatch"
	CatTimeout    = "timeout"
	CatRejected   = "rejected"
	CatTampering  = "tampering"
	CatFlagged    = "flagged"
	CatGeneration = "generation"
	CatNoVerdict  = "no_verdict"
	CatOther      = "other"
)

// Categories lists every category in report order.
var Categories = []string{CatPass, CatCompile, CatRuntime, CatMismatch, CatTimeout, CatRejected, CatTampering, CatFlagged,
	CatGeneration, CatNoVerdict, CatOther}

// categoryOf maps the contract's error classes (sdk.Class*) onto the paper's coarser ones.
var categoryOf = map[string]string{
	"compile_error":         CatCompile,
	"load_error":            CatCompile,
	"runtime_error":         CatRuntime,
	"illegal_memory_access": CatRuntime,
	"crash":                 CatRuntime,
	"output_mismatch":       CatMismatch,
	"nondeterministic":      CatMismatch,
	"timeout":               CatTimeout,
	"rejected":              CatRejected,
	"tampering":             CatTampering,
	"input_mutated":         CatTampering,
	ClassGeneration:         CatGeneration,
}

// Category is the row's outcome category under the options.
func Category(r Row, o Options) string {
	switch {
	case !r.Judged():
		return CatNoVerdict
	case r.Verdict == "pass" && o.correct(r):
		return CatPass
	case r.Verdict == "pass":
		return CatFlagged
	}
	if c, ok := categoryOf[r.Class]; ok {
		return c
	}
	return CatOther
}

// Breakdown counts attempts by category.
type Breakdown struct {
	Attempts int            `json:"attempts"`
	Count    map[string]int `json:"count"`
}

// Classes counts the rows' outcomes by category.
func Classes(rows []Row, o Options) Breakdown {
	b := Breakdown{Count: map[string]int{}}
	for _, r := range rows {
		b.Attempts++
		b.Count[Category(r, o)]++
	}
	return b
}
