package queue

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/kbplatform/kbplatform/sdk"
)

// Operations a job asks for.
const (
	OpCompile  = "compile"
	OpEvaluate = "evaluate"
	OpBaseline = "baseline"
	OpValidate = "validate"
)

// Job is one request to a worker. The task and kernel sources travel beside the requests
// because the SDK types leave them out of their JSON.
type Job struct {
	ID           string               `json:"id"`
	Op           string               `json:"op"`
	Kind         string               `json:"kind"`
	Device       string               `json:"device"` // as the study named it: cpu, cuda:h200
	TaskSource   string               `json:"task_source"`
	KernelSource string               `json:"kernel_source,omitempty"`
	Compile      *sdk.CompileRequest  `json:"compile,omitempty"`
	Evaluate     *sdk.EvaluateRequest `json:"evaluate,omitempty"`
	Baseline     *sdk.BaselineRequest `json:"baseline,omitempty"`
	Validate     *ValidateRequest     `json:"validate,omitempty"`
	Published    time.Time            `json:"published"`
	// Attempt counts the times the submitter re-queued the job because the worker running it
	// vanished (submit.go); a reply's delivery number includes them.
	Attempt int `json:"attempt,omitempty"`
}

// ValidateRequest asks a worker to run a task's reference alone.
type ValidateRequest struct {
	Task   sdk.Task   `json:"task"`
	Config sdk.Config `json:"config"`
}

// Reply is a worker's answer to a job, stored once in the results bucket.
type Reply struct {
	ID         string             `json:"id"`
	Worker     string             `json:"worker"`
	Device     string             `json:"device"` // the worker's own device: cuda:0
	Deliveries int                `json:"deliveries"`
	Compile    *sdk.CompileResult `json:"compile,omitempty"`
	Result     *sdk.Result        `json:"result,omitempty"`
	Validation *sdk.Validation    `json:"validation,omitempty"`
	// Error is the worker's target refusing the request (a device it lacks, a bad argument), or
	// the job's undoing (it exhausted its deliveries); the study records it as not the kernel's.
	Error    string    `json:"error,omitempty"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
}

// NewJobID is a job's key: what it measures (so that a log line says which unit it is) and a
// random part (so that a deliberate repeat, an A/A run, is a job of its own). Every delivery of
// one job carries the same ID, which is what makes a redelivered job judged once.
func NewJobID(op, kind, taskID, size, kernelHash string) string {
	h := sha256.Sum256([]byte(op + "|" + kind + "|" + taskID + "|" + size + "|" + kernelHash))
	var r [6]byte
	_, _ = rand.Read(r[:])
	return hex.EncodeToString(h[:6]) + hex.EncodeToString(r[:])
}

// resultKey is the job's key in the results bucket: by kind, so that a kind's results count.
func resultKey(kind, id string) string { return kind + "." + id }

// Encode is the job or reply as it travels: gzipped JSON (task sources and worker logs
// compress well, and NATS limits a message to about 1 MB).
func Encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(v); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// maxDecoded bounds what one message may inflate to.
const maxDecoded = 256 << 20

// Decode reads what Encode wrote.
func Decode(b []byte, v any) error {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("not a kbplatform job or reply: %w", err)
	}
	dec := json.NewDecoder(io.LimitReader(zr, maxDecoded))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("not a kbplatform job or reply: %w", err)
	}
	return nil
}

// Restore puts the sources back into the job's request.
func (j *Job) Restore() error {
	switch j.Op {
	case OpCompile:
		if j.Compile == nil {
			return fmt.Errorf("job %s: compile without request", j.ID)
		}
		j.Compile.Task.Source, j.Compile.Kernel.Source = j.TaskSource, j.KernelSource
	case OpEvaluate:
		if j.Evaluate == nil {
			return fmt.Errorf("job %s: evaluate without request", j.ID)
		}
		j.Evaluate.Task.Source, j.Evaluate.Kernel.Source = j.TaskSource, j.KernelSource
	case OpBaseline:
		if j.Baseline == nil {
			return fmt.Errorf("job %s: baseline without request", j.ID)
		}
		j.Baseline.Task.Source = j.TaskSource
	case OpValidate:
		if j.Validate == nil {
			return fmt.Errorf("job %s: validate without request", j.ID)
		}
		j.Validate.Task.Source = j.TaskSource
	default:
		return fmt.Errorf("job %s: unknown operation %q", j.ID, j.Op)
	}
	return nil
}

// Lane is the lane a job goes through.
func (j *Job) Lane() string {
	if j.Op == OpCompile {
		return LaneCompile
	}
	return LaneEval
}
