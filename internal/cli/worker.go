package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kbplatform/kbplatform/internal/gpulock"
	"github.com/kbplatform/kbplatform/internal/plugins"
	"github.com/kbplatform/kbplatform/internal/queue"
	"github.com/kbplatform/kbplatform/sdk"
)

func (a *app) workerCmd() *cobra.Command {
	var slurm bool
	var compileWorkers int
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Judge a study's jobs for the cluster target: one process per GPU, on any host",
		Long: `Take evaluation jobs of this device's GPU kind from the cluster's JetStream server and run them
under the local contract, exactly as eval does, one at a time; compile jobs of the kind run
beside them on --compile-workers CPU workers. The kind comes from the device (NVML's or torch's
name of the GPU: h200, l40s, 2080ti; cpu for the CPU), never from the job script.

The server is cluster.url in kbplatform.yaml (with cluster.user/password or cluster.nkey_file),
else the embedded server a kbplatform command on this host runs over the same --db; the worker
waits for it. With --slurm, the device is the GPU Slurm gave the job (--gres=gpu:<type>:1) and the
worker is named after the Slurm job. On SIGTERM or SIGINT a job in progress is stopped and handed
back to the queue for another worker. If the worker is killed outright, the candidate's processes
die with it, and its job goes to another worker: re-queued by the study once the worker's
presence has expired (about 10 s), or redelivered by the server after cluster.ack_wait.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			slurmJob := ""
			if slurm {
				slurmJob = os.Getenv("SLURM_JOB_ID")
				if slurmJob == "" {
					return fmt.Errorf("--slurm: not inside a Slurm job (no SLURM_JOB_ID); run it from sbatch or srun (docs/cluster.md)")
				}
				if step := os.Getenv("SLURM_STEP_ID"); step != "" {
					slurmJob += "." + step
				}
				gpus := os.Getenv("SLURM_JOB_GPUS") + os.Getenv("SLURM_STEP_GPUS") + os.Getenv("SLURM_GPUS_ON_NODE")
				if (gpus == "" || gpus == "0") && !cmd.Flags().Changed("device") {
					a.cfg.Device = "cpu" // no GPU was allocated: a CPU worker, whatever the node has
				}
			}
			ackWait, maxDeliver := a.v.GetDuration("cluster.ack_wait"), a.v.GetInt("cluster.max_deliver")
			if ackWait <= a.cfg.Contract.Timeout {
				return fmt.Errorf("cluster.ack_wait %s must exceed the evaluation limit contract.timeout %s: a job still running would be handed to a second worker",
					ackWait, a.cfg.Contract.Timeout)
			}
			if maxDeliver < 1 {
				return fmt.Errorf("cluster.max_deliver %d: want at least 1", maxDeliver)
			}
			pm := a.pluginManager()
			defer pm.Close()
			inst, err := pm.Start(a.ctx, "target/local", a.targetConfig(), nil)
			if err != nil {
				return err
			}
			defer inst.Close()
			hw, err := inst.Target().Describe(a.ctx)
			if err != nil {
				return fmt.Errorf("target/local: %w", err)
			}
			device, err := a.pickDevice(hw)
			if err != nil {
				return err
			}
			if !slurm { // under Slurm, the allocation is what keeps a GPU to one job
				unlock, err := lockDevice(device)
				if err != nil {
					return err
				}
				defer unlock()
			}
			kind, model := queue.KindCPU, ""
			for _, d := range hw.Devices {
				if d.Name == device {
					model = d.Model
					if d.Kind == "cuda" {
						kind = queue.GPUKind(d.Model)
					}
				}
			}
			if !cmd.Flags().Changed("compile-workers") {
				compileWorkers = a.cfg.CompileWorkers
				if kind == queue.KindCPU {
					compileWorkers = 0 // compiling beside a CPU timing would disturb it; CPU jobs compile in place
				}
			}
			if kind != queue.KindCPU && compileWorkers < 1 {
				// Studies on a GPU kind send compile jobs ahead of its evaluations (as eval compiles
				// ahead locally); with no compile lane anywhere they would wait for ever.
				return fmt.Errorf("--compile-workers %d: a GPU worker takes its kind's compile jobs too; give at least 1", compileWorkers)
			}
			host, _ := os.Hostname()
			id := workerID(host, device, slurmJob)
			info := queue.WorkerInfo{ID: id, Kind: kind, Host: host, Device: device, Model: model, Slurm: slurmJob}
			a.logf("worker %s: kind %s (%s %s), consumes %s", id, kind, device, model, queue.Subject(queue.LaneEval, kind))
			conn, url, err := a.workerConn(id)
			if err != nil {
				return err
			}
			defer conn.Close()
			a.logf("worker %s: connected to %s", id, url)
			err = conn.Serve(a.ctx, queue.WorkerOptions{Info: info, Consumer: queue.ConsumerOptions{AckWait: ackWait, MaxDeliver: maxDeliver},
				CompileWorkers: compileWorkers, Log: a.logf}, &localExec{target: inst, device: device})
			a.logf("worker %s: stopped", id)
			return err
		},
	}
	cmd.Flags().BoolVar(&slurm, "slurm", false, "run as a Slurm job step: the GPU Slurm allocated, named after the job")
	cmd.Flags().IntVar(&compileWorkers, "compile-workers", 0, "compile jobs taken beside the evaluation (default: compile_workers; 0 for a CPU worker)")
	cmd.Flags().String("device", "", "cpu or cuda:N (default: auto, the GPU when one is present)")
	return cmd
}

// logf prints a worker's log line with the time: a worker's stderr is its log.
func (a *app) logf(format string, args ...any) {
	fmt.Fprintf(a.errOut, "%s %s\n", time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), fmt.Sprintf(format, args...))
}

var unsafeID = regexp.MustCompile(`[^A-Za-z0-9_=-]+`)

// workerID names a worker uniquely and readably: host, device, and the Slurm job or the pid.
func workerID(host, device, slurmJob string) string {
	tail := fmt.Sprintf("pid%d", os.Getpid())
	if slurmJob != "" {
		tail = "slurm" + slurmJob
	}
	return unsafeID.ReplaceAllString(strings.Join([]string{host, device, tail}, "-"), "_")
}

// workerConn connects to cluster.url, or to the embedded server of a kbplatform command on this
// host (its URL file beside the database), waiting for it as long as the worker runs.
func (a *app) workerConn(id string) (*queue.Conn, string, error) {
	said := false
	for {
		url := a.v.GetString("cluster.url")
		if url == "" {
			if b, err := os.ReadFile(queue.URLFile(a.jetstreamDir())); err == nil {
				url = strings.TrimSpace(string(b))
			}
		}
		var err error
		if url != "" {
			ctx, cancel := context.WithTimeout(a.ctx, 30*time.Second)
			var c *queue.Conn
			c, err = queue.DialOnce(ctx, url, "kbplatform worker "+id, a.clusterAuth())
			cancel()
			if err == nil {
				c.Close()
				// Connected once: from now on the connection rides out restarts by itself.
				c, err = queue.Dial(a.ctx, url, "kbplatform worker "+id, a.clusterAuth())
				if err == nil {
					return c, url, nil
				}
			}
			if strings.Contains(strings.ToLower(fmt.Sprint(err)), "authoriz") {
				return nil, "", err // waiting will not fix credentials
			}
		}
		if !said {
			where := url
			if where == "" {
				where = "an embedded server (" + queue.URLFile(a.jetstreamDir()) + ")"
			}
			a.logf("worker %s: waiting for %s: %v", id, where, errOr(err, "not started yet"))
			said = true
		}
		select {
		case <-a.ctx.Done():
			return nil, "", a.ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func errOr(err error, s string) string {
	if err != nil {
		return err.Error()
	}
	return s
}

// localExec runs a job on this worker's device through the local target plugin, as eval does.
type localExec struct {
	target *plugins.Instance
	device string
}

func (x *localExec) Run(ctx context.Context, j *queue.Job, progress func(string)) *queue.Reply {
	t := x.target.Target()
	r := &queue.Reply{}
	var err error
	switch j.Op {
	case queue.OpCompile:
		req := *j.Compile
		req.Device = x.device
		r.Compile, err = t.Compile(ctx, req)
	case queue.OpEvaluate:
		req := *j.Evaluate
		req.Device = x.device
		r.Result, err = t.Evaluate(ctx, req, progress)
	case queue.OpBaseline:
		req := *j.Baseline
		req.Device = x.device
		r.Result, err = t.Baseline(ctx, req, progress)
	case queue.OpValidate:
		r.Validation, err = t.Validate(ctx, j.Validate.Task, x.device, j.Validate.Config)
	default:
		err = fmt.Errorf("unknown operation %q", j.Op)
	}
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, context.Canceled) {
			return &queue.Reply{Result: &sdk.Result{Verdict: sdk.VerdictError, ErrorClass: sdk.ClassInterrupted}}
		}
		return &queue.Reply{Error: err.Error()}
	}
	return r
}

// lockDevice keeps a second worker of this host off a GPU that one already serves (gpulock's
// "worker" lock). The CPU is not locked (a host may run several CPU workers, each with its own
// threads), and neither is a GPU under Slurm (its allocation does that).
func lockDevice(device string) (func(), error) {
	h, err := gpulock.TryLock(gpulock.Worker, device)
	if b, ok := err.(*gpulock.Busy); ok {
		return nil, fmt.Errorf("GPU %s (%s) is served by another worker on this host (%s): one worker per device", b.GPU, b.Device, b.Holder)
	}
	if err != nil {
		return nil, err
	}
	return h.Release, nil
}
