package queue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kbplatform/kbplatform/sdk"
	"github.com/nats-io/nats.go/jetstream"
)

// Executor runs one job on this worker's hardware and fills the reply's answer; progress
// reaches the study that submitted the job.
type Executor interface {
	Run(ctx context.Context, job *Job, progress func(string)) *Reply
}

// WorkerOptions configure Serve.
type WorkerOptions struct {
	Info     WorkerInfo // ID, Kind, Host, Device, Model, Slurm
	Consumer ConsumerOptions
	// CompileWorkers take compile jobs of the kind beside the one evaluation (0: none).
	CompileWorkers int
	Log            func(format string, args ...any)
}

// Serve takes jobs of the worker's kind until ctx ends: evaluations one at a time (the device's
// one-evaluation rule), compiles on CompileWorkers goroutines. A job whose evaluation ctx cut
// short is handed back (nak) for another worker.
func (c *Conn) Serve(ctx context.Context, opt WorkerOptions, exec Executor) error {
	if err := ValidKind(opt.Info.Kind); err != nil {
		return err
	}
	if opt.Log == nil {
		opt.Log = func(string, ...any) {}
	}
	w := &worker{c: c, opt: opt, exec: exec, info: opt.Info}
	w.info.Compiles = opt.CompileWorkers
	if w.info.Started.IsZero() {
		w.info.Started = time.Now().UTC()
	}
	actx, stopAnnounce := context.WithCancel(context.Background())
	announced := make(chan struct{})
	go func() { c.Announce(actx, w.status); close(announced) }()
	defer func() { stopAnnounce(); <-announced }()
	var wg sync.WaitGroup
	for i := 0; i < opt.CompileWorkers; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); w.loop(ctx, LaneCompile) }()
	}
	w.loop(ctx, LaneEval)
	wg.Wait()
	return nil
}

type worker struct {
	c    *Conn
	opt  WorkerOptions
	exec Executor

	mu   sync.Mutex
	info WorkerInfo
}

func (w *worker) status() WorkerInfo {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.info
}

// loop fetches one job at a time from the lane's consumer. Errors (a server away, a consumer
// not there yet) are waited out.
func (w *worker) loop(ctx context.Context, lane string) {
	var cons jetstream.Consumer
	var lastErr string
	for ctx.Err() == nil {
		var err error
		if cons == nil {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			cons, err = Consumer(cctx, w.c.JS, lane, w.info.Kind, w.opt.Consumer)
			cancel()
		}
		var batch jetstream.MessageBatch
		if err == nil {
			batch, err = cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
		}
		if err == nil {
			for m := range batch.Messages() {
				w.handle(ctx, lane, m)
			}
			err = batch.Error()
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			if err.Error() != lastErr {
				w.opt.Log("%s lane: %v (retrying)", lane, err)
				lastErr = err.Error()
			}
			if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) {
				cons = nil
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		lastErr = ""
	}
}

// handle runs one delivery of a job.
func (w *worker) handle(ctx context.Context, lane string, m jetstream.Msg) {
	deliveries := 1
	if md, err := m.Metadata(); err == nil {
		deliveries = int(md.NumDelivered)
	}
	var job Job
	if err := Decode(m.Data(), &job); err != nil {
		w.opt.Log("dropping a message on %s: %v", m.Subject(), err)
		_ = m.Term()
		return
	}
	deliveries += job.Attempt
	if job.Kind != w.info.Kind {
		// The consumer's filter makes this impossible; if it ever happens, hand it back.
		w.opt.Log("job %s is for kind %s, this worker is %s: handed back", job.ID, job.Kind, w.info.Kind)
		_ = m.NakWithDelay(5 * time.Second)
		return
	}
	key := resultKey(job.Kind, job.ID)
	if _, err := w.c.Results.Get(ctx, key); err == nil {
		// Judged already by a worker that died (or lost the server) before its ack.
		w.opt.Log("job %s (%s %s, delivery %d): already judged; acked without running it", job.ID, job.Op, jobTask(&job), deliveries)
		_ = m.Ack()
		return
	}
	if lane == LaneEval {
		w.mu.Lock()
		w.info.Busy = job.ID
		w.mu.Unlock()
		// Said at once, not at the next refresh: a study that sees its job on a worker whose
		// entry then expires re-queues it without waiting for AckWait.
		w.c.announce(w.status())
		defer func() {
			w.mu.Lock()
			w.info.Busy = ""
			w.info.Done++
			w.mu.Unlock()
		}()
	}
	w.opt.Log("job %s: %s %s on %s (delivery %d)", job.ID, job.Op, jobTask(&job), w.info.Device, deliveries)

	// Heartbeats: a live worker's job is never redelivered, however long it runs.
	hbCtx, stopHB := context.WithCancel(ctx)
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		every := min(max(w.opt.Consumer.AckWait/4, time.Second), 15*time.Second)
		if w.opt.Consumer.AckWait <= 0 {
			every = 15 * time.Second
		}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-hbCtx.Done():
				return
			case <-t.C:
				_ = m.InProgress()
			}
		}
	}()
	started := time.Now().UTC()
	var reply *Reply
	if err := job.Restore(); err != nil {
		reply = &Reply{Error: err.Error()}
	} else {
		reply = w.exec.Run(ctx, &job, func(msg string) { _ = w.c.NC.Publish(progressSubject(job.ID), []byte(msg)) })
	}
	stopHB()
	<-hbDone
	if ctx.Err() != nil || interrupted(reply) {
		w.opt.Log("job %s: stopped before it finished; handed back for another worker", job.ID)
		_ = m.Nak()
		return
	}
	reply.ID, reply.Worker, reply.Device, reply.Deliveries = job.ID, w.info.ID, w.info.Device, deliveries
	reply.Started, reply.Finished = started, time.Now().UTC()
	b, err := Encode(reply)
	if err != nil {
		reply = &Reply{ID: job.ID, Worker: w.info.ID, Deliveries: deliveries, Error: "encoding the reply: " + err.Error()}
		b, _ = Encode(reply)
	}
	for delay := 200 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = w.c.Results.Create(sctx, key, b)
		cancel()
		if err == nil || errors.Is(err, jetstream.ErrKeyExists) {
			break
		}
		select {
		case <-ctx.Done():
			_ = m.Nak()
			return
		case <-time.After(delay):
		}
	}
	if errors.Is(err, jetstream.ErrKeyExists) {
		w.opt.Log("job %s: another worker's result was stored first; this one is dropped", job.ID)
	}
	_ = w.c.NC.Publish(doneSubject(job.ID), nil)
	actx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if err := m.DoubleAck(actx); err != nil {
		w.opt.Log("job %s: ack: %v (a redelivery will find the stored result)", job.ID, err)
	}
	cancel()
	w.opt.Log("job %s: done (%s)", job.ID, summary(reply))
}

func interrupted(r *Reply) bool {
	return r != nil && r.Result != nil && r.Result.ErrorClass == sdk.ClassInterrupted
}

func jobTask(j *Job) string {
	switch {
	case j.Evaluate != nil:
		return j.Evaluate.Task.ID + " " + j.Evaluate.Kernel.Name
	case j.Compile != nil:
		return j.Compile.Task.ID + " " + j.Compile.Kernel.Name
	case j.Baseline != nil:
		return j.Baseline.Task.ID + " " + j.Baseline.Mode
	case j.Validate != nil:
		return j.Validate.Task.ID
	}
	return ""
}

func summary(r *Reply) string {
	switch {
	case r.Error != "":
		return "error: " + r.Error
	case r.Result != nil && r.Result.ErrorClass != "":
		return r.Result.Verdict + " " + r.Result.ErrorClass
	case r.Result != nil:
		return r.Result.Verdict
	case r.Compile != nil:
		return fmt.Sprintf("compiled ok=%v", r.Compile.OK)
	case r.Validation != nil:
		return fmt.Sprintf("validation ok=%v", r.Validation.OK)
	}
	return "no answer"
}
