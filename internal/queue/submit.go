package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// doneSubject is where a worker says, on core NATS, that a job's result is stored; the submitter
// wakes on it and reads the bucket (which it also polls, in case the word was lost).
func doneSubject(id string) string { return "kbp.done." + id }

// progressSubject carries a running job's progress lines from its worker (core NATS: a lost
// line is only a lost line).
func progressSubject(id string) string { return "kbp.progress." + id }

// exhaustedSubject carries JetStream's advisory for a job that reached MaxDeliver.
const exhaustedSubject = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + Stream + ".>"

// Submitter publishes jobs and waits for their replies.
type Submitter struct {
	c *Conn

	once sync.Once
	mu   sync.Mutex
	lost map[uint64]chan int // stream sequence → deliveries, for jobs that exhausted them
	// early holds advisories for sequences nobody tracks yet: a job that every worker hands
	// back at once can exhaust its deliveries before Submit has recorded its sequence.
	early      map[uint64]int
	earlyOrder []uint64
	sub        *nats.Subscription
}

// maxEarly bounds the advisories kept for untracked sequences. Every submitter hears every
// job's advisory, most of them for other submitters' jobs, so the oldest are dropped.
const maxEarly = 1024

// NewSubmitter returns a submitter on c.
func NewSubmitter(c *Conn) *Submitter {
	return &Submitter{c: c, lost: map[uint64]chan int{}, early: map[uint64]int{}}
}

// exhausted hands an advisory's delivery count to the Submit waiting on seq, or keeps it for
// a Submit that has not yet recorded seq.
func (s *Submitter) exhausted(seq uint64, deliveries int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch := s.lost[seq]; ch != nil {
		select {
		case ch <- deliveries:
		default:
		}
		return
	}
	if _, ok := s.early[seq]; !ok {
		s.earlyOrder = append(s.earlyOrder, seq)
	}
	s.early[seq] = deliveries
	for len(s.earlyOrder) > maxEarly {
		delete(s.early, s.earlyOrder[0])
		s.earlyOrder = s.earlyOrder[1:]
	}
}

// track records that lost hears seq's advisory, delivering one that came first.
func (s *Submitter) track(seq uint64, lost chan int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lost[seq] = lost
	if n, ok := s.early[seq]; ok {
		delete(s.early, seq)
		select {
		case lost <- n:
		default:
		}
	}
}

func (s *Submitter) untrack(seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.lost, seq)
}

func (s *Submitter) watchExhausted() {
	s.once.Do(func() {
		s.sub, _ = s.c.NC.Subscribe(exhaustedSubject, func(m *nats.Msg) {
			var adv struct {
				StreamSeq  uint64 `json:"stream_seq"`
				Deliveries int    `json:"deliveries"`
			}
			if json.Unmarshal(m.Data, &adv) != nil {
				return
			}
			s.exhausted(adv.StreamSeq, adv.Deliveries)
		})
	})
}

// Close stops listening for advisories.
func (s *Submitter) Close() {
	if s.sub != nil {
		_ = s.sub.Unsubscribe()
	}
}

// Submit publishes job and waits for its reply. It waits as long as ctx allows: a job queues
// until a worker of its kind takes it. A server that goes away is waited for. When ctx ends
// first, a job no worker has taken yet is withdrawn.
//
// note, when set, hears what happens to the job: queued, re-queued.
func (s *Submitter) Submit(ctx context.Context, job *Job, note func(string)) (*Reply, error) {
	if note == nil {
		note = func(string) {}
	}
	s.watchExhausted()
	done := make(chan struct{}, 1)
	sub, err := s.c.NC.Subscribe(doneSubject(job.ID), func(*nats.Msg) {
		select {
		case done <- struct{}{}:
		default:
		}
	})
	if err == nil {
		defer sub.Unsubscribe()
	}
	if psub, err := s.c.NC.Subscribe(progressSubject(job.ID), func(m *nats.Msg) { note(string(m.Data)) }); err == nil {
		defer psub.Unsubscribe()
	}
	subject := Subject(job.Lane(), job.Kind)
	publish := func() (uint64, error) {
		payload, err := Encode(job)
		if err != nil {
			return 0, err
		}
		// The message ID makes a publish retried after a lost ack one message, not two.
		msgID := job.ID
		if job.Attempt > 0 {
			msgID = fmt.Sprintf("%s-%d", job.ID, job.Attempt)
		}
		for delay := 100 * time.Millisecond; ; delay = min(2*delay, 2*time.Second) {
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			ack, err := s.c.JS.Publish(pctx, subject, payload, jetstream.WithMsgID(msgID))
			cancel()
			if err == nil {
				return ack.Sequence, nil
			}
			select {
			case <-ctx.Done():
				return 0, fmt.Errorf("publishing job %s to %s: %w (%v)", job.ID, subject, ctx.Err(), err)
			case <-time.After(delay):
			}
		}
	}
	seq, err := publish()
	if err != nil {
		return nil, err
	}
	note(fmt.Sprintf("job %s queued on %s (stream sequence %d)", job.ID, subject, seq))
	lost := make(chan int, 1)
	s.track(seq, lost)
	defer func() { s.untrack(seq) }()
	key := resultKey(job.Kind, job.ID)
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	runningOn := "" // the live worker last seen running the job
	var missingSince time.Time
	for {
		// An error other than ErrNoResult is a server away or restarting: keep waiting, the
		// job is on disk.
		if r, err := s.Result(ctx, job.Kind, job.ID); err == nil {
			return r, nil
		}
		select {
		case <-ctx.Done():
			s.withdraw(seq)
			return nil, ctx.Err()
		case n := <-lost:
			return s.giveUp(ctx, job, key, seq, n)
		case <-done:
		case <-poll.C:
			if job.Lane() != LaneEval {
				continue
			}
			// A worker killed mid-job stops refreshing its entry long before AckWait (which
			// must exceed the evaluation limit) would redeliver the job: re-queue it then.
			ws, err := s.c.ListWorkers(ctx)
			if err != nil {
				continue
			}
			gone := runningOn != ""
			for _, w := range ws {
				if w.Busy == job.ID {
					runningOn, gone = w.ID, false
					break
				}
				if w.ID == runningOn {
					gone = false
				}
			}
			if !gone {
				missingSince = time.Time{}
				continue
			}
			// Absent for a while, not just now: a restarted server forgets the (in-memory)
			// entries until the workers' next refresh.
			if missingSince.IsZero() {
				missingSince = time.Now()
			}
			if time.Since(missingSince) < 2*presenceEvery+time.Second {
				continue
			}
			if _, err := s.Result(ctx, job.Kind, job.ID); err == nil {
				continue // it finished before it went
			}
			if job.Attempt+2 > DefaultConsumerOptions.MaxDeliver {
				return s.giveUp(ctx, job, key, seq, job.Attempt+1)
			}
			note(fmt.Sprintf("job %s: worker %s running it is gone (no presence for %s); re-queued", job.ID, runningOn, presenceTTL))
			s.withdraw(seq)
			s.untrack(seq)
			job.Attempt++
			runningOn, missingSince = "", time.Time{}
			if seq, err = publish(); err != nil {
				return nil, err
			}
			s.track(seq, lost)
		}
	}
}

// giveUp stores an error as the reply of a job no worker finished in n deliveries, so that a
// late worker's result cannot be mistaken for a second verdict, and drops the job.
func (s *Submitter) giveUp(ctx context.Context, job *Job, key string, seq uint64, n int) (*Reply, error) {
	r := &Reply{ID: job.ID, Deliveries: n, Finished: time.Now().UTC(),
		Error: fmt.Sprintf("job %s was delivered %d times and no worker finished it (each one died or stopped on it)", job.ID, n)}
	if b, err := Encode(r); err == nil {
		_, _ = s.c.Results.Create(ctx, key, b)
	}
	s.withdraw(seq)
	if stored, err := s.Result(ctx, job.Kind, job.ID); err == nil {
		return stored, nil
	}
	return r, nil
}

// Result reads a job's stored reply (ErrNoResult when there is none).
func (s *Submitter) Result(ctx context.Context, kind, id string) (*Reply, error) {
	gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	e, err := s.c.Results.Get(gctx, resultKey(kind, id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, ErrNoResult
	}
	if err != nil {
		return nil, err
	}
	var r Reply
	if err := Decode(e.Value(), &r); err != nil {
		return nil, fmt.Errorf("job %s: stored reply: %w", id, err)
	}
	return &r, nil
}

// withdraw removes a job from the stream (a no-op for one a worker has acked already).
func (s *Submitter) withdraw(seq uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if st, err := s.c.JS.Stream(ctx, Stream); err == nil {
		_ = st.DeleteMsg(ctx, seq)
	}
}
