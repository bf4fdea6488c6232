package study

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/kbplatform/kbplatform/internal/gateway"
	"github.com/kbplatform/kbplatform/internal/plugins"
	"github.com/kbplatform/kbplatform/internal/registry"
	"github.com/kbplatform/kbplatform/internal/store"
	"github.com/kbplatform/kbplatform/sdk"
)

// Deps are what a study run needs.
type Deps struct {
	Store    *store.Store
	Registry *registry.Registry
	Plugins  *plugins.Manager
	// Progress receives one line per event (a unit starts, finishes, fails; a target's steps).
	Progress func(string)
	// Status receives the study's counts whenever they change, for a progress bar.
	Status func(Status)
	// Gateway gives the host-side settings of a model's calls (limits, retries, prices, cache);
	// nil: defaults. Name, plugin, settings and store are filled in by the study.
	Gateway func(model PluginRef) gateway.Options
	// Limiters are shared by every model of the process that talks to the same endpoint.
	Limiters *gateway.Limiters
	// Parallel is how many units run at once (their model calls overlap; their evaluations
	// still take each device one at a time). 0: 4.
	Parallel int
	// CompileWorkers bounds the candidates built ahead of the GPUs, shared by all devices. 0: 4.
	CompileWorkers int
	// Devices are the devices of the target that evaluations are spread over, one evaluation per
	// device at a time (all of one kind; the spec's Device stands for them in the spec, so that
	// the study's id and resumption do not depend on how many GPUs run it). Empty: the spec's
	// Device alone.
	Devices []string
	// Heartbeat is how often the run state is refreshed for `study status` (0: 5 s).
	Heartbeat time.Duration
}

// started are the plugins a run uses, one instance per distinct plugin and settings.
type started struct {
	d         Deps
	host      sdk.Platform
	instances map[string]*plugins.Instance
	gateways  map[string]*gateway.Gateway
	hardware  map[string]*sdk.Hardware
	recipes   map[string]*sdk.BuildRecipe
	lanes     map[string]*lane
}

func refKey(r PluginRef) string { return r.Ref + "\x00" + string(canonical(r.Config)) }

func (s *started) instance(ctx context.Context, kind string, r PluginRef, host sdk.Platform) (*plugins.Instance, error) {
	k := refKey(r)
	if i, ok := s.instances[k]; ok {
		return i, nil
	}
	i, err := s.d.Plugins.Start(ctx, r.Ref, r.Config, host)
	if err != nil {
		if kind == "model" {
			return nil, fmt.Errorf("model %s: %w", r.Label(), err)
		}
		return nil, fmt.Errorf("%s: %w", kind, err)
	}
	s.instances[k] = i
	return i, nil
}

// arm starts what an arm needs and returns its model gateway, target hardware and build recipe.
func (s *started) arm(ctx context.Context, a Arm, progress func(string)) error {
	t, err := s.instance(ctx, "target", a.Target, nil)
	if err != nil {
		return err
	}
	tk := refKey(a.Target)
	if _, ok := s.hardware[tk]; !ok {
		hw, err := t.Target().Describe(ctx)
		if err != nil {
			return fmt.Errorf("target: %w", err)
		}
		s.hardware[tk] = hw
	}
	b, err := s.instance(ctx, "backend", a.Backend, nil)
	if err != nil {
		return err
	}
	rk := refKey(a.Backend) + "\x01" + tk
	if _, ok := s.recipes[rk]; !ok {
		recipe, err := b.Backend().Recipe(ctx, s.hardware[tk])
		if err != nil {
			return fmt.Errorf("backend recipe: %w", err)
		}
		s.recipes[rk] = recipe
	}
	if _, err := s.instance(ctx, "strategy", a.Strategy, nil); err != nil {
		return err
	}
	mk := refKey(a.Model) + "\x00" + a.Model.Label()
	if _, ok := s.gateways[mk]; !ok {
		m, err := s.instance(ctx, "model", a.Model, s.host)
		if err != nil {
			return err
		}
		gopts := gateway.Options{Retry: gateway.DefaultRetry()}
		if s.d.Gateway != nil {
			gopts = s.d.Gateway(a.Model)
		}
		gopts.Name, gopts.Plugin, gopts.Config, gopts.Store = a.Model.Label(), a.Model.Ref, a.Model.Config, s.d.Store
		// Replaying costs nothing: its replies are made again rather than cached.
		gopts.Cacheable = !slices.Contains(m.Info().Capabilities, "deterministic")
		if gopts.Log == nil {
			gopts.Log = progress
		}
		s.gateways[mk] = gateway.New(m.Model(), gopts, s.d.Limiters)
	}
	return nil
}

// unitRun is a unit waiting to run.
type unitRun struct {
	arm   int
	task  sdk.Task
	key   string
	label string // arm label and task, for progress
	out   int    // index in the report's outcomes
}

// Run executes the study's units (arms × tasks), several at once, skipping those an earlier run
// finished. A unit is marked done only once its strategy run returned, so a run killed at any
// point (kill -9 included) loses no finished unit and redoes only the ones in flight. Errors of
// single units are reported in their outcome, not returned.
func Run(ctx context.Context, spec Spec, d Deps) (*Report, error) {
	if len(spec.Tasks) == 0 {
		return nil, errors.New("study has no tasks")
	}
	progress := d.Progress
	if progress == nil {
		progress = func(string) {}
	}
	parallel := d.Parallel
	if parallel < 1 {
		parallel = 4
	}
	compileWorkers := d.CompileWorkers
	if compileWorkers < 1 {
		compileWorkers = 4
	}
	id := spec.ID()
	raw, _ := json.Marshal(spec)
	if err := d.Store.PutStudy(store.Study{ID: id, Name: spec.Name, Spec: raw, CreatedAt: time.Now().UTC()}); err != nil {
		return nil, err
	}
	tasks := make([]sdk.Task, 0, len(spec.Tasks))
	for _, tid := range spec.Tasks {
		t, err := d.Registry.Get(tid)
		if err != nil {
			return nil, err
		}
		ct, err := t.Contract(t.PickSize(spec.Size, spec.Device))
		if err != nil {
			return nil, err
		}
		tasks = append(tasks, ct)
	}

	host := &hostPlatform{store: d.Store}
	s := &started{d: d, host: host, instances: map[string]*plugins.Instance{}, gateways: map[string]*gateway.Gateway{},
		hardware: map[string]*sdk.Hardware{}, recipes: map[string]*sdk.BuildRecipe{}, lanes: map[string]*lane{}}
	arms := spec.Arms()
	labels := spec.ArmLabels()
	for _, a := range arms {
		if err := s.arm(ctx, a, progress); err != nil {
			return nil, err
		}
	}

	rep := &Report{Study: id, Spec: spec}
	var todo []unitRun
	tr := newTracker(id, len(arms)*len(tasks), parallel)
	for ai, a := range arms {
		for _, task := range tasks {
			out := spec.outcome(a, labels[ai], task.ID)
			rep.Outcomes = append(rep.Outcomes, out)
			done, err := d.Store.UnitDone(id, out.Unit)
			if err != nil {
				return nil, err
			}
			label := task.ID
			if labels[ai] != "" {
				label = labels[ai] + " · " + task.ID
			}
			if done {
				rep.Outcomes[len(rep.Outcomes)-1].Done, rep.Outcomes[len(rep.Outcomes)-1].Skipped = true, true
				tr.skip()
				continue
			}
			todo = append(todo, unitRun{arm: ai, task: task, key: out.Unit, label: label, out: len(rep.Outcomes) - 1})
		}
	}
	if n := tr.skipped; n > 0 {
		progress(fmt.Sprintf("%d of %d units done in an earlier run", n, tr.total))
	}

	// The study's spend is priced as the unit budget prices it, cached replies included, so that
	// a resumed study counts what it counted before.
	byLabel := map[string]*gateway.Gateway{}
	for _, a := range arms {
		byLabel[a.Model.Label()] = s.gateways[refKey(a.Model)+"\x00"+a.Model.Label()]
	}
	price := func(c store.CallRecord) float64 {
		if g := byLabel[c.Model]; g != nil {
			return g.Price(&sdk.GenerateResponse{Usage: c.Usage, Model: c.ProviderModel})
		}
		return c.CostUSD
	}
	limit, err := newStudyLimit(d.Store, id, spec.Limit, price)
	if err != nil {
		return nil, err
	}
	hostname, _ := os.Hostname()
	state := store.StudyRun{Study: id, PID: os.Getpid(), Host: hostname, State: "running", Started: time.Now().UTC()}
	var stateMu sync.Mutex
	publish := func(final string, reason string) {
		st := tr.status()
		stateMu.Lock()
		defer stateMu.Unlock()
		if final != "" {
			state.State, state.Reason = final, reason
		}
		state.Updated = time.Now().UTC()
		state.Total, state.Done, state.Failed, state.Running, state.ETASeconds = st.Total, st.Done, st.Failed, st.RunningUnits, st.ETA.Seconds()
		if err := d.Store.PutStudyRun(state); err != nil {
			progress("cannot record the run's state for `study status`: " + err.Error())
		}
		if d.Status != nil {
			d.Status(st)
		}
	}
	publish("", "")
	beat := d.Heartbeat
	if beat <= 0 {
		beat = 5 * time.Second
	}
	stopBeat := make(chan struct{})
	beatDone := make(chan struct{})
	go func() {
		defer close(beatDone)
		t := time.NewTicker(beat)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				publish("", "")
			case <-stopBeat:
				return
			}
		}
	}()

	var wg sync.WaitGroup
	var fatalMu sync.Mutex
	var fatal error
	sem := make(chan struct{}, parallel)
launch:
	for i, u := range todo {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			break launch
		}
		fatalMu.Lock()
		stop := fatal != nil
		fatalMu.Unlock()
		if stop || ctx.Err() != nil {
			<-sem
			break
		}
		if why := limit.reached(); why != "" {
			<-sem
			rep.Stopped = fmt.Sprintf("study budget reached (%s): %d units not started; run it again with a bigger study budget to go on", why, len(todo)-i)
			progress(rep.Stopped)
			break
		}
		a := arms[u.arm]
		tk := refKey(a.Target)
		ln := s.lanes[tk]
		if ln == nil {
			devices := d.Devices
			if len(devices) == 0 {
				devices = []string{spec.Device}
			}
			models := map[string]string{}
			for _, dev := range s.hardware[tk].Devices {
				models[dev.Name] = dev.Model + "/" + dev.ComputeCapability
			}
			var err error
			if ln, err = newLane(devices, models, !slices.Contains(devices, "cpu") && compileWorkers > 1, compileWorkers); err != nil {
				<-sem
				fatalMu.Lock()
				fatal = err
				fatalMu.Unlock()
				break
			}
			s.lanes[tk] = ln
		}
		p := &runPlatform{hostPlatform: host, study: id, task: u.task, spec: spec, arm: a, armKey: a.Key(), hw: s.hardware[tk],
			recipe: s.recipes[refKey(a.Backend)+"\x01"+tk], model: s.gateways[refKey(a.Model)+"\x00"+a.Model.Label()],
			backend: s.instances[refKey(a.Backend)].Backend(), target: s.instances[tk].Target(), lane: ln,
			meter: newMeter(spec.Budget, nil), progress: func(m string) { progress(u.label + ": " + m) }}
		strategy := s.instances[refKey(a.Strategy)].Strategy()
		wg.Add(1)
		tr.begin(u.label)
		progress(fmt.Sprintf("[%d/%d] %s: %s with %s", tr.started(), tr.total, u.label, a.Strategy.Label(), a.Model.Label()))
		publish("", "")
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			begin := time.Now()
			res, err := strategy.Run(ctx, sdk.RunRequest{Task: u.task, Budget: spec.Budget, Seed: a.Seed, Study: id}, p)
			o := &rep.Outcomes[u.out]
			gens, evs, tokens, cost := p.meter.totals()
			// A failed unit's time and spend count against the study budget too.
			limit.add(begin, time.Now(), cost)
			if err != nil {
				if ctx.Err() == nil {
					// Interrupted, the unit did not fail: it did not finish, and a summary leaves it
					// out with the units that never ran unless an evaluation of it was stored.
					o.Error = err.Error()
				}
				tr.end(u.label, time.Since(begin), false)
				progress(fmt.Sprintf("%s: %v", u.label, err))
				publish("", "")
				return
			}
			model, backend, strat, target := a.Parts()
			if perr := d.Store.PutUnit(store.Unit{Study: id, Task: u.key, Attempts: res.Attempts, BestEvaluation: res.BestEvaluation,
				Note: res.Note, StartedAt: begin.UTC(), FinishedAt: time.Now().UTC(), TaskID: u.task.ID, Arm: a.Key(), Model: model,
				Backend: backend, Strategy: strat, Target: target, Seed: a.Seed, Generations: gens, Evaluations: evs, Tokens: tokens,
				CostUSD: cost}); perr != nil {
				fatalMu.Lock()
				fatal = perr
				fatalMu.Unlock()
				tr.end(u.label, time.Since(begin), false)
				return
			}
			o.Done = true
			tr.end(u.label, time.Since(begin), true)
			progress(fmt.Sprintf("%s: done in %.1fs", u.label, time.Since(begin).Seconds()))
			publish("", "")
		}()
	}
	wg.Wait()
	close(stopBeat)
	<-beatDone
	final, reason := "finished", ""
	switch {
	case fatal != nil:
		final, reason = "stopped", fatal.Error()
	case ctx.Err() != nil:
		final, reason = "stopped", "interrupted"
	case rep.Stopped != "":
		final, reason = "budget", rep.Stopped
	case tr.status().Failed > 0:
		reason = fmt.Sprintf("%d units failed; run the study again to retry them", tr.status().Failed)
	}
	publish(final, reason)
	if fatal != nil {
		return nil, fatal
	}
	if err := Summarize(d.Store, rep); err != nil {
		return nil, err
	}
	return rep, ctx.Err()
}

// studyLimit tracks a study's spend against its StudyBudget over all of its runs.
type studyLimit struct {
	mu        sync.Mutex
	limit     StudyBudget
	start     time.Time
	cost      float64
	intervals [][2]time.Time
}

func newStudyLimit(st *store.Store, id string, b StudyBudget, price func(store.CallRecord) float64) (*studyLimit, error) {
	l := &studyLimit{limit: b, start: time.Now()}
	if b == (StudyBudget{}) {
		return l, nil
	}
	calls, err := st.Calls(id)
	if err != nil {
		return nil, err
	}
	for _, c := range calls {
		l.cost += price(c)
	}
	units, err := st.Units(id)
	if err != nil {
		return nil, err
	}
	for _, u := range units {
		if !u.StartedAt.IsZero() {
			l.intervals = append(l.intervals, [2]time.Time{u.StartedAt, u.FinishedAt})
		}
	}
	return l, nil
}

func (l *studyLimit) add(from, to time.Time, cost float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cost += cost
	l.intervals = append(l.intervals, [2]time.Time{from, to})
}

// reached says which limit is spent, or "".
func (l *studyLimit) reached() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.limit.CostUSD > 0 && l.cost >= l.limit.CostUSD {
		return fmt.Sprintf("$%.4f of $%.4f spent", l.cost, l.limit.CostUSD)
	}
	if l.limit.Seconds > 0 {
		if s := wallTime(append(slices.Clone(l.intervals), [2]time.Time{l.start, time.Now()})); s >= l.limit.Seconds {
			return fmt.Sprintf("%.0f of %.0f seconds used", s, l.limit.Seconds)
		}
	}
	return ""
}

// wallTime is the length of the union of the intervals, in seconds: time two units ran side by
// side counts once.
func wallTime(iv [][2]time.Time) float64 {
	sort.Slice(iv, func(i, j int) bool { return iv[i][0].Before(iv[j][0]) })
	var total time.Duration
	var cur [2]time.Time
	for i, v := range iv {
		switch {
		case i == 0:
			cur = v
		case !v[0].After(cur[1]):
			if v[1].After(cur[1]) {
				cur[1] = v[1]
			}
		default:
			total += cur[1].Sub(cur[0])
			cur = v
		}
	}
	if len(iv) > 0 {
		total += cur[1].Sub(cur[0])
	}
	return total.Seconds()
}
