// Package cluster is the cluster target: it sends compile and evaluation jobs to `kbplatform
// worker` processes through NATS JetStream (internal/queue), one subject per GPU kind, and
// gathers their results. A study names a GPU kind as its device (cuda:h200, or cpu); any worker
// of that kind, on any host, may judge it, under the same contract as the local target.
package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/kbplatform/kbplatform/internal/contract"
	"github.com/kbplatform/kbplatform/internal/queue"
	"github.com/kbplatform/kbplatform/sdk"
)

// Version of the cluster target.
const Version = "0.1.0"

// Settings are the cluster target's configuration. What it leaves out comes from the
// environment the host gives the plugin (Env*): the host's cluster.* settings, with the URL of
// its embedded server when no server is configured.
type Settings struct {
	URL      string   `json:"url"`
	GPUKinds []string `json:"gpu_kinds,omitempty"`
	User     string   `json:"user,omitempty"`
	Password string   `json:"password,omitempty"`
	NkeyFile string   `json:"nkey_file,omitempty"`
}

// The environment the host passes the plugin its cluster settings in (the KBP_ names of the
// cluster.* settings).
const (
	EnvURL      = "KBP_CLUSTER_URL"
	EnvUser     = "KBP_CLUSTER_USER"
	EnvPassword = "KBP_CLUSTER_PASSWORD"
	EnvNkeyFile = "KBP_CLUSTER_NKEY_FILE"
	EnvGPUKinds = "KBP_CLUSTER_GPU_KINDS"
)

func fromEnv(s *Settings) {
	fill := func(v *string, name string) {
		if *v == "" {
			*v = os.Getenv(name)
		}
	}
	fill(&s.URL, EnvURL)
	fill(&s.User, EnvUser)
	fill(&s.Password, EnvPassword)
	fill(&s.NkeyFile, EnvNkeyFile)
	if len(s.GPUKinds) == 0 {
		for _, k := range strings.Split(os.Getenv(EnvGPUKinds), ",") {
			if k = strings.TrimSpace(k); k != "" {
				s.GPUKinds = append(s.GPUKinds, k)
			}
		}
	}
}

const schema = `{
  "type": "object",
  "properties": {
    "url":       {"type": "string", "description": "NATS server URL (nats://host:4222); default: the host's cluster.url, else its embedded server"},
    "gpu_kinds": {"type": "array", "items": {"type": "string"}, "description": "GPU kinds the study wants (h200, l40s, cpu): listed as devices cuda:<kind> even before a worker of the kind connects"},
    "user":      {"type": "string", "description": "NATS user (default: kbplatform.yaml cluster.user)"},
    "password":  {"type": "string", "description": "NATS password (default: kbplatform.yaml cluster.password)"},
    "nkey_file": {"type": "string", "description": "NATS nkey seed file (default: kbplatform.yaml cluster.nkey_file)"}
  },
  "additionalProperties": false
}`

// Target is the cluster target.
type Target struct {
	mu    sync.Mutex
	conn  *queue.Conn
	sub   *queue.Submitter
	sets  Settings
	slots *slots
}

var _ sdk.Target = (*Target)(nil)

// New returns an unconfigured cluster target.
func New() *Target { return &Target{} }

// Info identifies the plugin.
func (t *Target) Info() sdk.Info {
	return sdk.Info{Kind: sdk.KindTarget, Name: "cluster", Version: Version, ConfigSchema: schema,
		Capabilities: []string{"cluster", "contract:" + contract.Version, "compile", "baseline", "validate"},
		Description:  "workers of many GPU kinds on many hosts, reached through NATS JetStream (kbplatform worker)"}
}

// Configure connects to the server.
func (t *Target) Configure(ctx context.Context, c sdk.Configuration) error {
	var s Settings
	if err := c.Decode(&s); err != nil {
		return err
	}
	fromEnv(&s)
	if s.URL == "" {
		return fmt.Errorf("%w: url: the NATS server to send jobs to (kbplatform sets its embedded server's when cluster.url is not configured)", sdk.ErrInvalidConfig)
	}
	for _, k := range s.GPUKinds {
		if err := queue.ValidKind(k); err != nil {
			return fmt.Errorf("%w: gpu_kinds: %v", sdk.ErrInvalidConfig, err)
		}
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := queue.Dial(dctx, s.URL, "kbplatform target/cluster", queue.Auth{User: s.User, Password: s.Password, NkeyFile: s.NkeyFile})
	if err != nil {
		return fmt.Errorf("%w: %v", sdk.ErrUnavailable, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closeLocked()
	t.conn, t.sub, t.sets = conn, queue.NewSubmitter(conn), s
	t.slots = newSlots(conn)
	return nil
}

func (t *Target) ready() (*queue.Conn, *queue.Submitter, *slots, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.conn == nil {
		return nil, nil, nil, fmt.Errorf("%w: the cluster target is not configured", sdk.ErrUnavailable)
	}
	return t.conn, t.sub, t.slots, nil
}

// Status is what Describe reports under the fingerprint's "cluster" key: each kind's workers and
// jobs, and every live worker.
type Status struct {
	URL     string             `json:"url"`
	Kinds   []queue.Counts     `json:"kinds"`
	Workers []queue.WorkerInfo `json:"workers"`
}

// Describe lists one device per GPU kind (the configured ones and every kind a worker has), with
// the kind's workers and its queued, running and done jobs in Capabilities
// ("kind:h200 workers=2 queued=5 running=2 done=40") and in Fingerprint["cluster"].
func (t *Target) Describe(ctx context.Context) (*sdk.Hardware, error) {
	st, err := t.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", sdk.ErrUnavailable, err)
	}
	hw := &sdk.Hardware{Target: "cluster", Capabilities: t.Info().Capabilities, Fingerprint: sdk.Fingerprint{}}
	for _, c := range st.Kinds {
		d := sdk.Device{Name: queue.DeviceOf(c.Kind), Kind: "cuda"}
		if c.Kind == queue.KindCPU {
			d.Kind = "cpu"
		}
		for _, w := range st.Workers {
			if w.Kind == c.Kind && w.Model != "" {
				d.Model = w.Model
				break
			}
		}
		hw.Devices = append(hw.Devices, d)
		hw.Capabilities = append(hw.Capabilities, fmt.Sprintf("kind:%s workers=%d queued=%d running=%d done=%d", c.Kind, c.Workers, c.Queued, c.Running, c.Done))
	}
	// Through JSON, so that the fingerprint holds only what crosses the plugin boundary.
	var asMap map[string]any
	b, _ := json.Marshal(st)
	_ = json.Unmarshal(b, &asMap)
	hw.Fingerprint["cluster"] = asMap
	return hw, nil
}

// Status reads the kinds, their job counts and the live workers.
func (t *Target) Status(ctx context.Context) (*Status, error) {
	conn, _, _, err := t.ready()
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	sets := t.sets
	t.mu.Unlock()
	counts, workers, err := conn.KindCounts(ctx, sets.GPUKinds)
	if err != nil {
		return nil, err
	}
	return &Status{URL: sets.URL, Kinds: counts, Workers: workers}, nil
}

// submit sends a job of a kind and waits for its reply; evaluations hold one of the kind's
// slots while they wait, so that no more are in flight than there are workers of the kind.
func (t *Target) submit(ctx context.Context, job *queue.Job, progress sdk.Progress) (*queue.Reply, error) {
	_, sub, sl, err := t.ready()
	if err != nil {
		return nil, err
	}
	if job.Lane() == queue.LaneEval {
		if err := sl.acquire(ctx, job.Kind); err != nil {
			return nil, err
		}
		defer sl.release(job.Kind)
	}
	job.Published = time.Now().UTC()
	r, err := sub.Submit(ctx, job, func(msg string) {
		if progress != nil {
			progress(msg)
		}
	})
	if err != nil {
		return nil, err
	}
	if r.Error != "" {
		return nil, fmt.Errorf("%w: worker %s: %s", sdk.ErrUnavailable, orNone(r.Worker), r.Error)
	}
	return r, nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func kindOf(device string) (string, error) {
	k, err := queue.KindOf(device)
	if err != nil {
		return "", fmt.Errorf("%w: %v", sdk.ErrInvalidArgument, err)
	}
	return k, nil
}

// stamp makes a worker's result the study's: the device is the kind the study asked for, and the
// fingerprint says which worker, which of its devices and which delivery judged it (none of
// these keys changes the platform key).
func stamp(res *sdk.Result, device string, r *queue.Reply) {
	res.Device = device
	if res.Fingerprint == nil {
		res.Fingerprint = sdk.Fingerprint{}
	}
	res.Fingerprint["cluster_worker"] = r.Worker
	res.Fingerprint["cluster_device"] = r.Device
	res.Fingerprint["cluster_job"] = r.ID
	res.Fingerprint["cluster_deliveries"] = fmt.Sprint(r.Deliveries)
}

// Compile sends a compile job to the compile lanes of the kind's workers.
func (t *Target) Compile(ctx context.Context, req sdk.CompileRequest) (*sdk.CompileResult, error) {
	kind, err := kindOf(req.Device)
	if err != nil {
		return nil, err
	}
	job := &queue.Job{ID: queue.NewJobID(queue.OpCompile, kind, req.Task.ID, req.Task.Size, req.Kernel.Hash), Op: queue.OpCompile,
		Kind: kind, Device: req.Device, TaskSource: req.Task.Source, KernelSource: req.Kernel.Source, Compile: &req}
	r, err := t.submit(ctx, job, nil)
	if err != nil {
		return nil, err
	}
	if r.Compile == nil {
		return nil, fmt.Errorf("%w: worker %s answered a compile job without a compile result", sdk.ErrUnavailable, r.Worker)
	}
	return r.Compile, nil
}

// Evaluate sends an evaluation job to the kind's workers and waits for its result.
func (t *Target) Evaluate(ctx context.Context, req sdk.EvaluateRequest, progress sdk.Progress) (*sdk.Result, error) {
	kind, err := kindOf(req.Device)
	if err != nil {
		return nil, err
	}
	job := &queue.Job{ID: queue.NewJobID(queue.OpEvaluate, kind, req.Task.ID, req.Task.Size, req.Kernel.Hash), Op: queue.OpEvaluate,
		Kind: kind, Device: req.Device, TaskSource: req.Task.Source, KernelSource: req.Kernel.Source, Evaluate: &req}
	r, err := t.submit(ctx, job, progress)
	if err != nil {
		return nil, err
	}
	if r.Result == nil {
		return nil, fmt.Errorf("%w: worker %s answered an evaluation without a result", sdk.ErrUnavailable, r.Worker)
	}
	stamp(r.Result, req.Device, r)
	if progress != nil {
		progress(fmt.Sprintf("job %s judged by worker %s (%s, delivery %d)", r.ID, r.Worker, r.Device, r.Deliveries))
	}
	return r.Result, nil
}

// Baseline times the task's own Model on a worker of the kind.
func (t *Target) Baseline(ctx context.Context, req sdk.BaselineRequest, progress sdk.Progress) (*sdk.Result, error) {
	kind, err := kindOf(req.Device)
	if err != nil {
		return nil, err
	}
	job := &queue.Job{ID: queue.NewJobID(queue.OpBaseline, kind, req.Task.ID, req.Task.Size, req.Mode), Op: queue.OpBaseline,
		Kind: kind, Device: req.Device, TaskSource: req.Task.Source, Baseline: &req}
	r, err := t.submit(ctx, job, progress)
	if err != nil {
		return nil, err
	}
	if r.Result == nil {
		return nil, fmt.Errorf("%w: worker %s answered a baseline without a result", sdk.ErrUnavailable, r.Worker)
	}
	stamp(r.Result, req.Device, r)
	return r.Result, nil
}

// Validate runs the task's reference alone on a worker of the kind.
func (t *Target) Validate(ctx context.Context, task sdk.Task, device string, cfg sdk.Config) (*sdk.Validation, error) {
	kind, err := kindOf(device)
	if err != nil {
		return nil, err
	}
	job := &queue.Job{ID: queue.NewJobID(queue.OpValidate, kind, task.ID, task.Size, ""), Op: queue.OpValidate,
		Kind: kind, Device: device, TaskSource: task.Source, Validate: &queue.ValidateRequest{Task: task, Config: cfg}}
	r, err := t.submit(ctx, job, nil)
	if err != nil {
		return nil, err
	}
	if r.Validation == nil {
		return nil, fmt.Errorf("%w: worker %s answered a validation without one", sdk.ErrUnavailable, r.Worker)
	}
	r.Validation.Device = device
	return r.Validation, nil
}

// Close disconnects; jobs in flight stay queued for the workers.
func (t *Target) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closeLocked()
}

func (t *Target) closeLocked() {
	if t.sub != nil {
		t.sub.Close()
	}
	if t.conn != nil {
		t.conn.Close()
	}
	t.conn, t.sub = nil, nil
}
