// Package queue carries evaluations between a study and the workers that judge them, on NATS
// JetStream: one work-queue stream of jobs with a subject per GPU kind (kbp.eval.h200,
// kbp.compile.h200), a key-value bucket of results keyed by job, and a bucket of live workers.
// It also starts the embedded JetStream server used when no server is configured.
//
// JetStream gives what a scheduler of our own would have to re-invent: a job is removed from the
// stream only when a worker acks it, a worker that dies stops sending in-progress heartbeats and
// its job is redelivered after AckWait, and MaxDeliver bounds how often that happens. The
// results bucket makes a redelivered job judged once: a worker that finds the job's result
// already stored acks it without running it, and a result is written with Create, which refuses
// a second one.
package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Names of the JetStream objects. They are part of the wire: workers and studies of different
// kbplatform versions meet on them.
const (
	Stream         = "KBP_JOBS"
	ResultsBucket  = "kbp-results"
	WorkersBucket  = "kbp-workers"
	evalPrefix     = "kbp.eval."
	compilePrefix  = "kbp.compile."
	resultTTL      = 7 * 24 * time.Hour
	presenceTTL    = 10 * time.Second // a worker silent this long is gone
	presenceEvery  = 2 * time.Second
	duplicatesSpan = 10 * time.Minute // a job re-published within this span is stored once
)

// Lanes: evaluations (one at a time per worker: they use the device) and compiles (CPU work
// ahead of the device).
const (
	LaneEval    = "eval"
	LaneCompile = "compile"
)

// Subject is where jobs of a lane and GPU kind are published.
func Subject(lane, kind string) string {
	if lane == LaneCompile {
		return compilePrefix + kind
	}
	return evalPrefix + kind
}

// consumerName is the durable pull consumer every worker of a lane and kind shares.
func consumerName(lane, kind string) string { return lane + "-" + kind }

// Setup creates (or updates) the stream and the buckets. Studies and workers both call it, so
// either may start first.
func Setup(ctx context.Context, js jetstream.JetStream) error {
	_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        Stream,
		Description: "kbplatform evaluation and compile jobs, one subject per GPU kind",
		Subjects:    []string{evalPrefix + ">", compilePrefix + ">"},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Duplicates:  duplicatesSpan,
	})
	if err != nil {
		return fmt.Errorf("stream %s: %w", Stream, err)
	}
	if _, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: ResultsBucket, TTL: resultTTL,
		Storage: jetstream.FileStorage, Description: "job results, one per job: a redelivered job is judged once"}); err != nil {
		return fmt.Errorf("bucket %s: %w", ResultsBucket, err)
	}
	if _, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: WorkersBucket, TTL: presenceTTL,
		Storage: jetstream.MemoryStorage, Description: "live workers; an entry not refreshed expires"}); err != nil {
		return fmt.Errorf("bucket %s: %w", WorkersBucket, err)
	}
	return nil
}

// ConsumerOptions bound redelivery.
type ConsumerOptions struct {
	// AckWait is how long a job may go without an ack or heartbeat before it is redelivered; it
	// must exceed the evaluation limit, so that a live worker's job is never handed to another.
	AckWait time.Duration
	// MaxDeliver bounds the deliveries of one job (a job that kills every worker it meets).
	MaxDeliver int
}

// DefaultConsumerOptions are used when a setting is zero.
var DefaultConsumerOptions = ConsumerOptions{AckWait: 30 * time.Minute, MaxDeliver: 3}

// Consumer creates (or updates) the shared pull consumer of a lane and kind.
func Consumer(ctx context.Context, js jetstream.JetStream, lane, kind string, o ConsumerOptions) (jetstream.Consumer, error) {
	if err := ValidKind(kind); err != nil {
		return nil, err
	}
	if o.AckWait <= 0 {
		o.AckWait = DefaultConsumerOptions.AckWait
	}
	if o.MaxDeliver <= 0 {
		o.MaxDeliver = DefaultConsumerOptions.MaxDeliver
	}
	c, err := js.CreateOrUpdateConsumer(ctx, Stream, jetstream.ConsumerConfig{
		Durable:       consumerName(lane, kind),
		Description:   fmt.Sprintf("kbplatform workers of kind %s (%s jobs)", kind, lane),
		FilterSubject: Subject(lane, kind),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       o.AckWait,
		MaxDeliver:    o.MaxDeliver,
		MaxAckPending: -1,
	})
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", consumerName(lane, kind), err)
	}
	return c, nil
}

// ErrNoResult means a job's result is not stored (yet).
var ErrNoResult = errors.New("no result yet")
