package faults

import (
	"regexp"
	"strings"
)

// The patterns are written against the idioms of the bundled kernels and of the kernels models
// write: a remainder loop `for (; i < n; ++i)`, a grid-stride loop, a step clamped at the end
// (`n - i < STEP ? n - i : STEP`), a Triton mask `offs < n`, `triton.cdiv(n, BLOCK)`. Where a
// file does not use an idiom, the class is not applicable to it (counted, not hidden).

// Languages whose kernels are C or C++ source (a CPU extension, CUDA, CUTLASS).
var cFamily = []string{"cpp", "cuda", "cutlass"}

var (
	gpuC   = []string{"cuda", "cutlass"}
	triton = []string{"triton"}
)

// checkLine marks a line that checks shapes rather than computes: rewriting the axis of a check
// makes a kernel raise, which says nothing about the contract.
var checkLine = regexp.MustCompile(`TORCH_CHECK|raise |^\s*if\b`)

// dropped replaces a statement or block by a comment that says what was there.
func dropped(what string) func(m []string) (string, bool) {
	return func(m []string) (string, bool) { return "/* " + what + " dropped */", true }
}

func variants(c Class) []variant {
	switch c {
	case NegativeBranch:
		return []variant{{name: "max(0, x) dropped", all: true, rules: []rule{
			{langs: cFamily, re: regexp.MustCompile(`_mm(?:256)?_max_ps\(zero, (_mm(?:256)?_loadu_ps\([^()]*\))\)`), repl: template("$1")},
			{langs: cFamily, re: regexp.MustCompile(`(\w+) < 0\.0f \? 0\.0f : (\w+)`), repl: same("$1", 1, 2)},
			{langs: cFamily, re: regexp.MustCompile(`fmaxf\(0\.0f, ([^()\n]+)\)`), repl: template("$1")},
			{langs: cFamily, re: regexp.MustCompile(`fmaxf\(([^()\n,]+), 0\.0f\)`), repl: template("$1")},
			{langs: gpuC, re: regexp.MustCompile(`cutlass::epilogue::thread::ReLu<`), repl: template("cutlass::epilogue::thread::Identity<")},
			{langs: triton, re: regexp.MustCompile(`tl\.where\((\w+) < 0(?:\.0)?, 0(?:\.0)?, (\w+)\)`), repl: same("$1", 1, 2)},
			{langs: triton, re: regexp.MustCompile(`tl\.maximum\((\w+), 0(?:\.0)?\)`), repl: template("$1")},
		}}}
	case OffByOne:
		return []variant{{name: "bound one short", rules: []rule{
			{what: "remainder loop one short", langs: cFamily,
				re:   regexp.MustCompile(`for \(; (\w+) < (\w+); \+\+(\w+)\)`),
				repl: same("for (; $1 < $2 - 1; ++$1)", 1, 3)},
			{what: "element loop one short", langs: cFamily,
				re:   regexp.MustCompile(`for \((int64_t|int) (\w+) = 0; (\w+) < (\w+); \+\+(\w+)\)(\s*)(\w+\[)`),
				repl: same("for ($1 $2 = 0; $2 < $4 - 1; ++$2)$6$7", 2, 3, 5)},
			{what: "tail loop one short", langs: cFamily,
				re: regexp.MustCompile(`for \(int64_t (\w+) = ([^;]+); (\w+) < (\w+); \+\+(\w+)\)`),
				repl: func(m []string) (string, bool) {
					if m[2] == "0" || m[1] != m[3] || m[1] != m[5] {
						return "", false
					}
					return expand("for (int64_t $1 = $2; $1 < $4 - 1; ++$1)", m), true
				}},
			{what: "grid-stride loop one short", langs: gpuC,
				re:   regexp.MustCompile(`; (\w+) < (\w+); (\w+) \+= (stride|blockDim\.x)\)`),
				repl: same("; $1 < $2 - 1; $3 += $4)", 1, 3)},
			{what: "mask one short", langs: triton,
				re:   regexp.MustCompile(`(offs\w*(?:\[[^\]\n]*\])?) < (\w+)`),
				repl: template("$1 < $2 - 1")},
		}}}
	case TailUnhandled:
		return []variant{{name: "remainder not computed", rules: []rule{
			{what: "remainder loop dropped", langs: cFamily,
				re: regexp.MustCompile(`for \(; (\w+) < (\w+); \+\+(\w+)\)\s*(\{[^{}]*\}|[^;{}]*;)`),
				repl: func(m []string) (string, bool) {
					if m[1] != m[3] {
						return "", false
					}
					return "/* remainder loop dropped */", true
				}},
			{what: "partial last step skipped", langs: cFamily,
				re: regexp.MustCompile(`for \(int64_t (\w+) = 0; (\w+) < (\w+); (\w+) \+= (\w+)\) \{(\s*)const int64_t (\w+) = (\w+) - (\w+) < (\w+) \?`),
				repl: func(m []string) (string, bool) {
					if m[1] != m[2] || m[1] != m[4] || m[1] != m[9] || m[3] != m[8] || m[5] != m[10] {
						return "", false
					}
					return expand("for (int64_t $1 = 0; $1 + $5 <= $3; $1 += $5) {$6const int64_t $7 = $8 - $9 < $10 ?", m), true
				}},
			{what: "remainder loop dropped", langs: cFamily,
				re:   regexp.MustCompile(`for \(int64_t (\w+) = ((?:vec_end|tail\w*|done|n4)\b[^;]*); (\w+) < (\w+); ([^)]*)\)\s*(\{[^{}]*\}|[^;{}]*;)`),
				repl: dropped("remainder loop")},
			{what: "remainder launch dropped", langs: gpuC,
				re:   regexp.MustCompile(`if \((done|tail\w*) < (\w+)\) \{[^{}]*\}`),
				repl: dropped("remainder launch")},
			{what: "remainder block dropped", langs: triton,
				re: regexp.MustCompile(`if tail < (\w+):`), repl: template("if False:  # remainder block dropped")},
			{what: "grid rounded down", langs: triton,
				re: regexp.MustCompile(`(?:tl|triton)\.cdiv\((\w+), (_?BLOCK\w*)\)`), repl: template("($1 // $2)")},
			{what: "loop rounded down", langs: triton,
				re: regexp.MustCompile(`range\(0, (\w+), (BLOCK\w*)\)`), repl: template("range(0, $1 // $2 * $2, $2)")},
		}}}
	case WrongAxis:
		return []variant{{name: "other dimension", rules: []rule{
			{what: "size(-1) read as size(0)", langs: cFamily, re: regexp.MustCompile(`\.size\(-1\)`), repl: template(".size(0)"), skipLine: checkLine},
			{what: "size(1) read as size(0)", langs: cFamily, re: regexp.MustCompile(`\b(\w+)\.size\(1\)`), repl: template("$1.size(0)"), skipLine: checkLine},
			{what: "shape[-1] read as shape[0]", langs: triton, re: regexp.MustCompile(`\.shape\[-1\]`), repl: template(".shape[0]"), skipLine: checkLine},
			{what: "dimensions swapped", langs: triton, re: regexp.MustCompile(`(\w+), (\w+) = (\w+)\.shape\b`), repl: template("$2, $1 = $3.shape")},
		}}}
	case WrongEpsilon:
		return []variant{{name: "epsilon x10", rules: []rule{
			{re: regexp.MustCompile(`\+ (static_cast<double>\(eps\)|eps\b)`), repl: template("+ 10.0 * $1")},
		}}}
	case LowPrecision:
		return []variant{{name: "low precision", rules: []rule{
			{what: "bf16 accumulators", langs: cFamily,
				re: regexp.MustCompile(`float (\w+)\[(\w+)\] = \{0\.0f\};`), repl: template("c10::BFloat16 $1[$2] = {};")},
			{what: "bf16 accumulator", langs: cFamily,
				re: regexp.MustCompile(`double (sum|total|acc) = 0\.0;`), repl: template("c10::BFloat16 $1 = 0.0f;")},
			{what: "fp16 operands", langs: cFamily,
				re:   regexp.MustCompile(`(out\[[^\]\n]+\] = )(\w+\[[^\]\n]+\]);`),
				repl: template("$1static_cast<float>(static_cast<c10::Half>($2));")},
			{what: "fp16 operands", langs: gpuC,
				re:   regexp.MustCompile(`fmaf\(([^,()]+), ([^,()]+), `),
				repl: template("fmaf(static_cast<float>(static_cast<c10::Half>($1)), static_cast<float>(static_cast<c10::Half>($2)), ")},
			{what: "fp16 operands", langs: triton,
				re:   regexp.MustCompile(`tl\.dot\((\w+), (\w+), (\w+), input_precision="ieee"\)`),
				repl: template("tl.dot($1.to(tl.float16), $2.to(tl.float16), $3)")},
			{what: "bf16-rounded loads", langs: triton,
				re: regexp.MustCompile(`(= tl\.load\([^\n]*\))(\n)`), repl: template("$1.to(tl.bfloat16).to(tl.float32)$2")},
		}}}
	case Unwritten:
		return []variant{{name: "half written", rules: []rule{
			{what: "GEMM over half the rows", langs: []string{"cpp"},
				re: regexp.MustCompile(`\bgemm\((\w+), `), repl: template("gemm($1 / 2, ")},
			{what: "half the rows", langs: cFamily,
				re: regexp.MustCompile(`const int64_t rows = ([^;\n]+);`), repl: template("const int64_t rows = ($1) / 2;")},
			{what: "half the elements", langs: cFamily,
				re:   regexp.MustCompile(`(torch::Tensor \w+ = torch::empty(?:_like)?\([^;\n]*\);\s*const int64_t n = )(\w+)\.numel\(\);`),
				repl: template("$1$2.numel() / 2;")},
			{what: "half the programs", langs: triton,
				re:   regexp.MustCompile(`(_\w+_kernel)\[\(((?:triton\.cdiv\(\w+, \w+\))|[A-Za-z_]\w*),\)\]`),
				repl: template("$1[(max(1, $2 // 2),)]")},
			{what: "half the programs", langs: triton,
				re: regexp.MustCompile(`grid = \((.+),\)\n`), repl: template("grid = (max(1, ($1) // 2),)\n")},
		}}}
	case MissingSync:
		return []variant{{name: "__syncthreads() dropped", all: true, rules: []rule{
			{langs: gpuC, re: regexp.MustCompile(`__syncthreads\(\);`), repl: template("(void)0; /* __syncthreads() dropped */")},
		}}}
	case CachedResult:
		return []variant{
			{name: "cached by input pointer", rules: []rule{{edit: cacheForward(true)}}},
			{name: "computed once", rules: []rule{{edit: cacheForward(false)}}},
		}
	}
	return nil
}

// forwardDef is ModelNew's forward (the bundled kernels define one, four spaces in).
var forwardDef = regexp.MustCompile(`(?m)^    def forward\(self`)

// cacheForward renames ModelNew's forward and puts a cache in front of it: keyed by the inputs'
// data pointers (a new result only for a new address), or by nothing (the first result forever).
// Both return the very tensor they returned before, as a kernel that memoises does.
func cacheForward(byPointer bool) func(src string) (string, int) {
	return func(src string) (string, int) {
		if !strings.Contains(src, "class ModelNew(") || len(forwardDef.FindAllStringIndex(src, -1)) != 1 {
			return src, 0
		}
		key := "None"
		if byPointer {
			key = "tuple(a.data_ptr() if isinstance(a, torch.Tensor) else a for a in args)"
		}
		src = forwardDef.ReplaceAllString(src, "    def _kbp_uncached_forward(self")
		return src + `

def _kbp_cached_forward(self, *args):
    key = ` + key + `
    cache = self.__dict__.setdefault("_kbp_cache", {})
    if key not in cache:
        cache[key] = self._kbp_uncached_forward(*args)
    return cache[key]


ModelNew.forward = _kbp_cached_forward
`, 1
	}
}
