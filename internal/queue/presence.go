package queue

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// WorkerInfo is what a live worker says about itself, refreshed every few seconds in the workers
// bucket; an entry that is not refreshed expires, so a killed worker disappears.
type WorkerInfo struct {
	ID       string    `json:"id"`
	Kind     string    `json:"kind"`
	Host     string    `json:"host"`
	Device   string    `json:"device"`
	Model    string    `json:"model,omitempty"` // the GPU's (or CPU's) name
	Slurm    string    `json:"slurm,omitempty"` // the Slurm job, when placed by Slurm
	Started  time.Time `json:"started"`
	Busy     string    `json:"busy,omitempty"` // the job it runs now
	Done     int       `json:"done"`
	Compiles int       `json:"compile_workers"`
}

func workerKey(w WorkerInfo) string { return w.Kind + "." + w.ID }

// Announce keeps w's entry fresh until ctx ends, then removes it. status is read before each
// refresh (busy job, done count).
func (c *Conn) Announce(ctx context.Context, status func() WorkerInfo) {
	c.announce(status())
	t := time.NewTicker(presenceEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = c.Workers.Delete(dctx, workerKey(status()))
			cancel()
			return
		case <-t.C:
			c.announce(status())
		}
	}
}

// announce writes w's entry once.
func (c *Conn) announce(w WorkerInfo) {
	b, _ := json.Marshal(w)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = c.Workers.Put(ctx, workerKey(w), b)
}

// Workers lists the live workers, by kind then id.
func (c *Conn) ListWorkers(ctx context.Context) ([]WorkerInfo, error) {
	keys, err := c.Workers.Keys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []WorkerInfo
	for _, k := range keys {
		e, err := c.Workers.Get(ctx, k)
		if err != nil {
			continue // expired between the listing and the read
		}
		var w WorkerInfo
		if json.Unmarshal(e.Value(), &w) == nil {
			out = append(out, w)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// Counts are one kind's jobs.
type Counts struct {
	Kind    string `json:"kind"`
	Workers int    `json:"workers"`
	Queued  int    `json:"queued"`  // published, not yet taken by a worker
	Running int    `json:"running"` // taken, not yet acked
	Done    int    `json:"done"`    // results stored (and not yet expired)
}

// KindCounts counts the evaluation jobs of each kind in kinds, of every kind a worker has, and
// of every kind with jobs in the stream.
func (c *Conn) KindCounts(ctx context.Context, kinds []string) ([]Counts, []WorkerInfo, error) {
	workers, err := c.ListWorkers(ctx)
	if err != nil {
		return nil, nil, err
	}
	byKind := map[string]*Counts{}
	var order []string
	add := func(k string) *Counts {
		if cn, ok := byKind[k]; ok {
			return cn
		}
		byKind[k] = &Counts{Kind: k}
		order = append(order, k)
		return byKind[k]
	}
	for _, k := range kinds {
		add(k)
	}
	for _, w := range workers {
		add(w.Kind).Workers++
	}
	// And every kind with jobs waiting, workers or not.
	if st, err := c.JS.Stream(ctx, Stream); err == nil {
		if info, err := st.Info(ctx, jetstream.WithSubjectFilter(evalPrefix+">")); err == nil {
			var waiting []string
			for subj := range info.State.Subjects {
				waiting = append(waiting, strings.TrimPrefix(subj, evalPrefix))
			}
			sort.Strings(waiting)
			for _, k := range waiting {
				add(k)
			}
		}
	}
	done := map[string]int{}
	if keys, err := c.Results.ListKeys(ctx); err == nil {
		for k := range keys.Keys() {
			if i := strings.IndexByte(k, '.'); i > 0 {
				done[k[:i]]++
			}
		}
	}
	for _, k := range order {
		cn := byKind[k]
		cn.Done = done[k]
		cons, err := c.JS.Consumer(ctx, Stream, consumerName(LaneEval, k))
		if err == nil {
			if info, err := cons.Info(ctx); err == nil {
				cn.Queued, cn.Running = int(info.NumPending), info.NumAckPending
				continue
			}
		}
		// No worker of this kind ever started: what is queued sits in the stream.
		if s, err := c.JS.Stream(ctx, Stream); err == nil {
			if info, err := s.Info(ctx, jetstream.WithSubjectFilter(Subject(LaneEval, k))); err == nil {
				cn.Queued = int(info.State.Subjects[Subject(LaneEval, k)])
			}
		}
	}
	out := make([]Counts, 0, len(order))
	for _, k := range order {
		out = append(out, *byKind[k])
	}
	return out, workers, nil
}
