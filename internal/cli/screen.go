package cli

import (
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/kbplatform/kbplatform/internal/plugins"
	"github.com/kbplatform/kbplatform/sdk"
)

// languageMarks guess a kernel file's backend when eval is not told: the first that matches wins.
var languageMarks = []struct {
	backend string
	re      *regexp.Regexp
}{
	{"triton", regexp.MustCompile(`@triton\.(jit|autotune|heuristics)`)},
	{"cutlass", regexp.MustCompile(`#\s*include\s*[<"](cutlass|cute)/`)},
	{"cuda", regexp.MustCompile(`cuda_sources|__global__`)},
}

// guessBackend names the backend whose language a candidate is written in.
func guessBackend(source string) string {
	for _, m := range languageMarks {
		if m.re.MatchString(source) {
			return m.backend
		}
	}
	return "cpp"
}

// screener runs backends' static checks for eval, starting each backend once.
type screener struct {
	a        *app
	pm       *plugins.Manager
	backends map[string]*plugins.Instance
	failed   map[string]bool
	recipes  map[string]*sdk.BuildRecipe
	noRecipe map[string]bool
}

func (a *app) newScreener(pm *plugins.Manager) *screener {
	return &screener{a: a, pm: pm, backends: map[string]*plugins.Instance{}, failed: map[string]bool{},
		recipes: map[string]*sdk.BuildRecipe{}, noRecipe: map[string]bool{}}
}

// check returns the findings of backend (guessed from the source when empty) on a candidate. When
// the checks cannot run, eval goes on without them and says so once per backend.
func (s *screener) check(backend string, task sdk.Task, k sdk.Kernel) []sdk.Issue {
	if backend == "" {
		backend = guessBackend(k.Source)
	}
	if s.failed[backend] {
		return nil
	}
	inst, ok := s.backends[backend]
	if !ok {
		var cfg json.RawMessage
		if p := s.a.cfg.Python; p != "" {
			cfg, _ = json.Marshal(map[string]string{"python": p})
		}
		var err error
		inst, err = s.pm.Start(s.a.ctx, "backend/"+backend, cfg, nil)
		if err != nil {
			s.skip(backend, err)
			return nil
		}
		s.backends[backend] = inst
	}
	issues, err := inst.Backend().Check(s.a.ctx, k.Source, task)
	if err != nil {
		s.skip(backend, err)
		return nil
	}
	return issues
}

// recipe returns the build recipe of backend (guessed from the source when empty) for hw: the
// flags and include paths its kernels build with (CUTLASS's headers for backend/cutlass). Nil
// when the backend gives none; a backend that cannot give one (cutlass without cutlass_path or
// $CUTLASS_PATH) is said once, and its kernels build without.
func (s *screener) recipe(backend string, k sdk.Kernel, hw *sdk.Hardware) *sdk.BuildRecipe {
	if backend == "" {
		backend = guessBackend(k.Source)
	}
	inst, ok := s.backends[backend]
	if !ok || s.failed[backend] || s.noRecipe[backend] {
		return nil
	}
	if r, ok := s.recipes[backend]; ok {
		return r
	}
	r, err := inst.Backend().Recipe(s.a.ctx, hw)
	if err != nil {
		s.noRecipe[backend] = true
		fmt.Fprintf(s.a.errOut, "warning: backend/%s gives no build recipe, its kernels build without: %v\n", backend, err)
		return nil
	}
	s.recipes[backend] = r
	return r
}

func (s *screener) skip(backend string, err error) {
	s.failed[backend] = true
	fmt.Fprintf(s.a.errOut, "warning: static checks of backend/%s skipped: %v\n", backend, err)
}
