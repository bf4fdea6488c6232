// Package pluginhost is the host's side of the plugin protocol: a connected plugin process as a
// Model, Backend, Strategy or Target, and the host's Platform served back to it. The SDK (sdk/)
// serves plugins; this side stays with the host, so third parties build against the SDK alone.
package pluginhost

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	pb "github.com/kbplatform/kbplatform/proto/kbplatform/plugin/v1"
	"github.com/kbplatform/kbplatform/sdk"
)

// GRPCPlugin dials a plugin process (the host's half of sdk.GRPCPlugin).
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
}

// GRPCServer is the plugin's half: a host serves no plugin.
func (GRPCPlugin) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error {
	return fmt.Errorf("pluginhost: the host serves no plugin (use sdk.Serve in a plugin binary)")
}

// GRPCClient returns a *Remote for the connection; it reads the plugin's Info first.
func (GRPCPlugin) GRPCClient(ctx context.Context, broker *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	r := &Remote{conn: c, broker: broker, base: pb.NewBaseClient(c)}
	info, err := r.base.Info(ctx, &pb.InfoRequest{})
	if err != nil {
		return nil, fmt.Errorf("plugin did not answer Info: %w", sdk.FromStatus(err))
	}
	r.info = sdk.Info{Kind: info.Kind, Name: info.Name, Version: info.Version, Description: info.Description,
		Capabilities: info.Capabilities, ConfigSchema: info.ConfigSchema, Protocol: int(info.Protocol), SDKVersion: info.SdkVersion}
	return r, nil
}

// PluginSet is what a go-plugin client dials: the one kbplatform plugin.
func PluginSet() plugin.PluginSet { return plugin.PluginSet{sdk.PluginKey: GRPCPlugin{}} }

// Remote is a connected plugin as the host sees it.
type Remote struct {
	conn   *grpc.ClientConn
	broker *plugin.GRPCBroker
	base   pb.BaseClient
	info   sdk.Info
}

// sdk.Info is what the plugin said it is when it connected.
func (r *Remote) Info() sdk.Info { return r.info }

// Configure sends the settings; platform, when not nil, is served to the plugin over the broker.
func (r *Remote) Configure(ctx context.Context, raw json.RawMessage, platform sdk.Platform) error {
	req := &pb.ConfigureRequest{ConfigJson: raw}
	if len(raw) == 0 {
		req.ConfigJson = []byte("{}")
	}
	if platform != nil {
		req.PlatformBrokerId = r.ServePlatform(platform)
	}
	_, err := r.base.Configure(ctx, req)
	return sdk.FromStatus(err)
}

// ServePlatform serves p to the plugin and returns the broker id to hand it.
func (r *Remote) ServePlatform(p sdk.Platform) uint32 {
	id := r.broker.NextId()
	go r.broker.AcceptAndServe(id, func(opts []grpc.ServerOption) *grpc.Server {
		s := grpc.NewServer(append(opts, sdk.ServerOptions()...)...)
		pb.RegisterPlatformServer(s, &PlatformServer{Impl: p})
		return s
	})
	return id
}

// sdk.Model returns the plugin as a sdk.Model (its kind must be model).
func (r *Remote) Model() sdk.Model { return &modelClient{r: r, c: pb.NewModelClient(r.conn)} }

// sdk.Backend returns the plugin as a sdk.Backend.
func (r *Remote) Backend() sdk.Backend { return &backendClient{r: r, c: pb.NewBackendClient(r.conn)} }

// sdk.Strategy returns the plugin as a sdk.Strategy.
func (r *Remote) Strategy() sdk.Strategy {
	return &strategyClient{r: r, c: pb.NewStrategyClient(r.conn)}
}

// sdk.Target returns the plugin as a sdk.Target.
func (r *Remote) Target() sdk.Target { return &targetClient{r: r, c: pb.NewTargetClient(r.conn)} }

type remoteBase struct{ r *Remote }

func (b remoteBase) Info() sdk.Info { return b.r.info }

func (b remoteBase) Configure(ctx context.Context, c sdk.Configuration) error {
	return b.r.Configure(ctx, c.Raw, c.Platform)
}

type modelClient struct {
	r *Remote
	c pb.ModelClient
}

func (m *modelClient) Info() sdk.Info { return m.r.info }
func (m *modelClient) Configure(ctx context.Context, c sdk.Configuration) error {
	return remoteBase{m.r}.Configure(ctx, c)
}

func (m *modelClient) Generate(ctx context.Context, req sdk.GenerateRequest) (*sdk.GenerateResponse, error) {
	resp, err := m.c.Generate(ctx, sdk.GenerateReqToPB(req))
	if err != nil {
		return nil, sdk.FromStatus(err)
	}
	return sdk.GenerateRespFromPB(resp), nil
}

type backendClient struct {
	r *Remote
	c pb.BackendClient
}

func (b *backendClient) Info() sdk.Info { return b.r.info }
func (b *backendClient) Configure(ctx context.Context, c sdk.Configuration) error {
	return remoteBase{b.r}.Configure(ctx, c)
}

func (b *backendClient) Prompt(ctx context.Context, req sdk.PromptRequest) ([]sdk.Message, error) {
	resp, err := b.c.Prompt(ctx, &pb.PromptRequest{Task: sdk.TaskToPB(req.Task), Variant: req.Variant, Hardware: sdk.HardwareToPB(req.Hardware),
		Feedback: req.Feedback, History: sdk.MessagesToPB(req.History)})
	if err != nil {
		return nil, sdk.FromStatus(err)
	}
	return sdk.MessagesFromPB(resp.Messages), nil
}

func (b *backendClient) Extract(ctx context.Context, text string) (string, error) {
	resp, err := b.c.Extract(ctx, &pb.ExtractRequest{Text: text})
	if err != nil {
		return "", sdk.FromStatus(err)
	}
	return resp.Source, nil
}

func (b *backendClient) Check(ctx context.Context, source string, task sdk.Task) ([]sdk.Issue, error) {
	resp, err := b.c.Check(ctx, &pb.CheckRequest{Source: source, Task: sdk.TaskToPB(task)})
	if err != nil {
		return nil, sdk.FromStatus(err)
	}
	return sdk.IssuesFromPB(resp.Issues), nil
}

func (b *backendClient) Recipe(ctx context.Context, hw *sdk.Hardware) (*sdk.BuildRecipe, error) {
	resp, err := b.c.Recipe(ctx, &pb.RecipeRequest{Hardware: sdk.HardwareToPB(hw)})
	if err != nil {
		return nil, sdk.FromStatus(err)
	}
	return sdk.RecipeFromPB(resp), nil
}

type strategyClient struct {
	r *Remote
	c pb.StrategyClient
}

func (s *strategyClient) Info() sdk.Info { return s.r.info }
func (s *strategyClient) Configure(ctx context.Context, c sdk.Configuration) error {
	return remoteBase{s.r}.Configure(ctx, c)
}

func (s *strategyClient) Run(ctx context.Context, req sdk.RunRequest, p sdk.Platform) (*sdk.RunResult, error) {
	id := s.r.ServePlatform(p)
	resp, err := s.c.Run(ctx, &pb.RunRequest{Task: sdk.TaskToPB(req.Task), Seed: req.Seed, Study: req.Study, PlatformBrokerId: id,
		Budget: sdk.BudgetToPB(req.Budget)})
	if err != nil {
		return nil, sdk.FromStatus(err)
	}
	return &sdk.RunResult{Attempts: int(resp.Attempts), BestEvaluation: resp.BestEvaluation, Note: resp.Note}, nil
}

type targetClient struct {
	r *Remote
	c pb.TargetClient
}

func (t *targetClient) Info() sdk.Info { return t.r.info }
func (t *targetClient) Configure(ctx context.Context, c sdk.Configuration) error {
	return remoteBase{t.r}.Configure(ctx, c)
}

func (t *targetClient) Describe(ctx context.Context) (*sdk.Hardware, error) {
	resp, err := t.c.Describe(ctx, &pb.DescribeRequest{})
	if err != nil {
		return nil, sdk.FromStatus(err)
	}
	return sdk.HardwareFromPB(resp), nil
}

func (t *targetClient) Compile(ctx context.Context, req sdk.CompileRequest) (*sdk.CompileResult, error) {
	resp, err := t.c.Compile(ctx, &pb.CompileRequest{Task: sdk.TaskToPB(req.Task), Kernel: sdk.KernelToPB(req.Kernel), Device: req.Device, Recipe: sdk.RecipeToPB(req.Recipe)})
	if err != nil {
		return nil, sdk.FromStatus(err)
	}
	return sdk.CompileFromPB(resp), nil
}

type eventStream interface {
	Recv() (*pb.EvaluateEvent, error)
}

func drain(s eventStream, progress sdk.Progress) (*sdk.Result, error) {
	for {
		ev, err := s.Recv()
		if err == io.EOF {
			return nil, fmt.Errorf("%w: the target ended the stream without a result", sdk.ErrUnavailable)
		}
		if err != nil {
			return nil, sdk.FromStatus(err)
		}
		switch e := ev.Event.(type) {
		case *pb.EvaluateEvent_Progress:
			if progress != nil {
				progress(e.Progress)
			}
		case *pb.EvaluateEvent_Result:
			return sdk.ResultFromPB(e.Result), nil
		}
	}
}

func (t *targetClient) Evaluate(ctx context.Context, req sdk.EvaluateRequest, progress sdk.Progress) (*sdk.Result, error) {
	s, err := t.c.Evaluate(ctx, &pb.EvaluateRequest{Task: sdk.TaskToPB(req.Task), Kernel: sdk.KernelToPB(req.Kernel), Device: req.Device,
		Config: sdk.ConfigToPB(req.Config), Compiled: sdk.CompileToPB(req.Compiled), Recipe: sdk.RecipeToPB(req.Recipe)})
	if err != nil {
		return nil, sdk.FromStatus(err)
	}
	res, err := drain(s, progress)
	if res != nil {
		res.Task.Source, res.Kernel.Source = req.Task.Source, req.Kernel.Source
	}
	return res, err
}

func (t *targetClient) Baseline(ctx context.Context, req sdk.BaselineRequest, progress sdk.Progress) (*sdk.Result, error) {
	s, err := t.c.Baseline(ctx, &pb.BaselineRequest{Task: sdk.TaskToPB(req.Task), Device: req.Device, Mode: req.Mode, Config: sdk.ConfigToPB(req.Config)})
	if err != nil {
		return nil, sdk.FromStatus(err)
	}
	return drain(s, progress)
}

func (t *targetClient) Validate(ctx context.Context, task sdk.Task, device string, cfg sdk.Config) (*sdk.Validation, error) {
	resp, err := t.c.Validate(ctx, &pb.ValidateRequest{Task: sdk.TaskToPB(task), Device: device, Config: sdk.ConfigToPB(cfg)})
	if err != nil {
		return nil, sdk.FromStatus(err)
	}
	return sdk.ValidationFromPB(resp), nil
}

// PlatformServer serves a sdk.Platform implementation (the host's) over gRPC.
type PlatformServer struct {
	pb.UnimplementedPlatformServer
	Impl sdk.Platform
}

// Prompt implements the sdk.Platform service.
func (s *PlatformServer) Prompt(ctx context.Context, req *pb.PlatformPromptRequest) (*pb.PlatformPromptResponse, error) {
	msgs, err := s.Impl.Prompt(ctx, req.Variant, req.Feedback, sdk.MessagesFromPB(req.History))
	if err != nil {
		return nil, sdk.ToStatus(err)
	}
	return &pb.PlatformPromptResponse{Messages: sdk.MessagesToPB(msgs)}, nil
}

// Extract implements the sdk.Platform service.
func (s *PlatformServer) Extract(ctx context.Context, req *pb.ExtractCodeRequest) (*pb.ExtractCodeResponse, error) {
	src, err := s.Impl.Extract(ctx, req.Text)
	if err != nil {
		return nil, sdk.ToStatus(err)
	}
	return &pb.ExtractCodeResponse{Source: src}, nil
}

// Generate implements the sdk.Platform service.
func (s *PlatformServer) Generate(ctx context.Context, req *pb.GenerateRequest) (*pb.GenerateResponse, error) {
	resp, err := s.Impl.Generate(ctx, sdk.GenerateReqFromPB(req))
	if err != nil {
		return nil, sdk.ToStatus(err)
	}
	return sdk.GenerateRespToPB(resp), nil
}

// Evaluate implements the sdk.Platform service.
func (s *PlatformServer) Evaluate(ctx context.Context, req *pb.PlatformEvaluateRequest) (*pb.PlatformEvaluateResponse, error) {
	ev, err := s.Impl.Evaluate(ctx, req.Source, req.Name)
	if err != nil {
		return nil, sdk.ToStatus(err)
	}
	return &pb.PlatformEvaluateResponse{EvaluationId: ev.ID, Result: sdk.ResultToPB(ev.Result), Issues: sdk.IssuesToPB(ev.Issues)}, nil
}

// Record implements the sdk.Platform service.
func (s *PlatformServer) Record(ctx context.Context, a *pb.Attempt) (*pb.RecordResponse, error) {
	id, err := s.Impl.Record(ctx, sdk.AttemptFromPB(a))
	if err != nil {
		return nil, sdk.ToStatus(err)
	}
	return &pb.RecordResponse{Id: id}, nil
}

// Kernels implements the sdk.Platform service.
func (s *PlatformServer) Kernels(ctx context.Context, req *pb.KernelsRequest) (*pb.KernelsResponse, error) {
	ks, err := s.Impl.StoredKernels(ctx, sdk.KernelQuery{Task: req.TaskId, Limit: int(req.Limit), Study: req.Study, Passed: req.Passed})
	if err != nil {
		return nil, sdk.ToStatus(err)
	}
	out := &pb.KernelsResponse{}
	for _, k := range ks {
		out.Kernels = append(out.Kernels, sdk.KernelToPB(k))
	}
	return out, nil
}
