package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kbplatform/kbplatform/internal/footprint"
	"github.com/kbplatform/kbplatform/internal/pyenv"
	"github.com/kbplatform/kbplatform/internal/registry"
	"github.com/kbplatform/kbplatform/sdk"
)

// defaultMemoryShare is the share of the machine's RAM a CPU evaluation may need (memory_share).
const defaultMemoryShare = 0.5

// memoryGuard decides, before anything runs on this machine's CPU, which tasks would need more
// memory than memory_share of its RAM.
type memoryGuard struct {
	limit, total int64
	share        float64
	est          map[string]footprint.Estimate
}

// guardMemory estimates the tasks when they are to run on the local target's CPU; it returns nil
// (nothing to guard) otherwise. A probe that cannot run refuses nothing: the contract reports
// whatever the task's code does.
func (a *app) guardMemory(device string, tasks []sdk.Task) *memoryGuard {
	ref := strings.TrimPrefix(a.v.GetString("target"), "target/")
	if device != "cpu" || ref != "local" || len(tasks) == 0 {
		return nil
	}
	total, err := footprint.TotalRAM()
	if err != nil {
		return nil
	}
	py := a.cfg.Python
	if py == "" {
		p, err := pyenv.Find(a.ctx, "")
		if err != nil {
			return nil
		}
		py = p.Path
	}
	var list []footprint.Task
	for _, t := range tasks {
		list = append(list, footprint.Task{ID: t.ID + "@" + t.Size, Source: t.Source})
	}
	a.progress("estimating the memory of %d task(s) on the CPU", len(list))
	est, err := footprint.Probe(a.ctx, py, list)
	if err != nil {
		a.progress("memory estimate skipped: %v", err)
	}
	share := a.v.GetFloat64("memory_share")
	return &memoryGuard{limit: int64(share * float64(total)), total: total, share: share, est: est}
}

// refuse says why the task must not run here, or "".
func (g *memoryGuard) refuse(t sdk.Task, rt *registry.Task) string {
	if g == nil {
		return ""
	}
	e, ok := g.est[t.ID+"@"+t.Size]
	if !ok || e.Error != "" || e.Need() <= g.limit {
		return ""
	}
	hint := "run it on a GPU (--device cuda:0)"
	if rt != nil && t.Size != "cpu" && slices.Contains(rt.Sizes(), "cpu") {
		hint = "use its CPU size (--size cpu) or " + hint
	} else {
		hint = "use a smaller size (--size) or " + hint
	}
	return fmt.Sprintf("%s (size %s) needs about %s on the CPU (inputs %s, parameters %s, outputs %s, held %d times), more than memory_share %.0f%% of this machine's %s; %s, or raise memory_share",
		t.ID, t.Size, footprint.GiB(e.Need()), footprint.GiB(e.InputsBytes), footprint.GiB(e.ParamsBytes), footprint.GiB(e.OutputBytes),
		footprint.Copies, 100*g.share, footprint.GiB(g.total), hint)
}
