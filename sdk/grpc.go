package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	pb "github.com/kbplatform/kbplatform/proto/kbplatform/plugin/v1"
)

// Handshake is the go-plugin handshake shared by host and plugins. ProtocolVersion is the plugin
// protocol's major version: a plugin built for another one is refused at start.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  Protocol,
	MagicCookieKey:   "KBPLATFORM_PLUGIN",
	MagicCookieValue: "f3c1a9d2-kernels-correct-and-fast",
}

// PluginKey is the single plugin name every kbplatform plugin binary serves under.
const PluginKey = "kbplatform"

// GRPCPlugin adapts an implementation (plugin side) or dials one (host side).
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl Plugin // nil on the host side
}

// GRPCServer registers Base and the service of the implementation's kind.
func (g *GRPCPlugin) GRPCServer(broker *plugin.GRPCBroker, s *grpc.Server) error {
	info := g.Impl.Info()
	pb.RegisterBaseServer(s, &baseServer{impl: g.Impl, broker: broker})
	ok := false
	switch info.Kind {
	case KindModel:
		var impl Model
		if impl, ok = g.Impl.(Model); ok {
			pb.RegisterModelServer(s, &modelServer{impl: impl})
		}
	case KindBackend:
		var impl Backend
		if impl, ok = g.Impl.(Backend); ok {
			pb.RegisterBackendServer(s, &backendServer{impl: impl})
		}
	case KindStrategy:
		var impl Strategy
		if impl, ok = g.Impl.(Strategy); ok {
			pb.RegisterStrategyServer(s, &strategyServer{impl: impl, broker: broker})
		}
	case KindTarget:
		var impl Target
		if impl, ok = g.Impl.(Target); ok {
			pb.RegisterTargetServer(s, &targetServer{impl: impl})
		}
	default:
		return fmt.Errorf("plugin %q says kind %q; kinds are model, backend, strategy, target", info.Name, info.Kind)
	}
	if !ok {
		return fmt.Errorf("plugin %q says kind %q but %T does not implement sdk.%s%s", info.Name, info.Kind, g.Impl,
			strings.ToUpper(info.Kind[:1]), info.Kind[1:])
	}
	return nil
}

// GRPCClient returns a *Remote for the connection; it reads the plugin's Info first.
func (g *GRPCPlugin) GRPCClient(ctx context.Context, broker *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	r := &Remote{conn: c, broker: broker, base: pb.NewBaseClient(c)}
	info, err := r.base.Info(ctx, &pb.InfoRequest{})
	if err != nil {
		return nil, fmt.Errorf("plugin did not answer Info: %w", FromStatus(err))
	}
	r.info = Info{Kind: info.Kind, Name: info.Name, Version: info.Version, Description: info.Description,
		Capabilities: info.Capabilities, ConfigSchema: info.ConfigSchema, Protocol: int(info.Protocol), SDKVersion: info.SdkVersion}
	return r, nil
}

// ---- plugin side --------------------------------------------------------------------------------

type baseServer struct {
	pb.UnimplementedBaseServer
	impl   Plugin
	broker *plugin.GRPCBroker
}

func (s *baseServer) Info(context.Context, *pb.InfoRequest) (*pb.PluginInfo, error) {
	i := s.impl.Info()
	return &pb.PluginInfo{Kind: i.Kind, Name: i.Name, Version: i.Version, Description: i.Description,
		Capabilities: i.Capabilities, ConfigSchema: i.ConfigSchema, Protocol: Protocol, SdkVersion: Version}, nil
}

func (s *baseServer) Configure(ctx context.Context, req *pb.ConfigureRequest) (*pb.ConfigureResponse, error) {
	c := Configuration{Raw: json.RawMessage(req.ConfigJson)}
	if req.PlatformBrokerId != 0 {
		c.Platform = &lazyPlatform{broker: s.broker, id: req.PlatformBrokerId}
	}
	if err := s.impl.Configure(ctx, c); err != nil {
		return nil, ToStatus(err)
	}
	return &pb.ConfigureResponse{}, nil
}

// lazyPlatform dials the host's Platform on first use.
type lazyPlatform struct {
	broker *plugin.GRPCBroker
	id     uint32
	once   sync.Once
	client Platform
	err    error
}

func (l *lazyPlatform) get() (Platform, error) {
	l.once.Do(func() {
		conn, err := l.broker.DialWithOptions(l.id, DialOptions()...)
		if err != nil {
			l.err = fmt.Errorf("%w: dial the host's platform: %v", ErrUnavailable, err)
			return
		}
		l.client = &platformClient{c: pb.NewPlatformClient(conn)}
	})
	return l.client, l.err
}

func (l *lazyPlatform) Prompt(ctx context.Context, variant, feedback string, history []Message) ([]Message, error) {
	p, err := l.get()
	if err != nil {
		return nil, err
	}
	return p.Prompt(ctx, variant, feedback, history)
}

func (l *lazyPlatform) Extract(ctx context.Context, text string) (string, error) {
	p, err := l.get()
	if err != nil {
		return "", err
	}
	return p.Extract(ctx, text)
}

func (l *lazyPlatform) Generate(ctx context.Context, req GenerateRequest) (*GenerateResponse, error) {
	p, err := l.get()
	if err != nil {
		return nil, err
	}
	return p.Generate(ctx, req)
}

func (l *lazyPlatform) Evaluate(ctx context.Context, source, name string) (*Evaluation, error) {
	p, err := l.get()
	if err != nil {
		return nil, err
	}
	return p.Evaluate(ctx, source, name)
}

func (l *lazyPlatform) Record(ctx context.Context, a Attempt) (string, error) {
	p, err := l.get()
	if err != nil {
		return "", err
	}
	return p.Record(ctx, a)
}

func (l *lazyPlatform) Kernels(ctx context.Context, taskID string, limit int) ([]Kernel, error) {
	return l.StoredKernels(ctx, KernelQuery{Task: taskID, Limit: limit})
}

func (l *lazyPlatform) StoredKernels(ctx context.Context, q KernelQuery) ([]Kernel, error) {
	p, err := l.get()
	if err != nil {
		return nil, err
	}
	return p.StoredKernels(ctx, q)
}

type modelServer struct {
	pb.UnimplementedModelServer
	impl Model
}

func (s *modelServer) Generate(ctx context.Context, req *pb.GenerateRequest) (*pb.GenerateResponse, error) {
	resp, err := s.impl.Generate(ctx, generateReqFromPB(req))
	if err != nil {
		return nil, ToStatus(err)
	}
	if resp == nil {
		return nil, ToStatus(errors.New("model returned no response"))
	}
	return generateRespToPB(resp), nil
}

type backendServer struct {
	pb.UnimplementedBackendServer
	impl Backend
}

func (s *backendServer) Prompt(ctx context.Context, req *pb.PromptRequest) (*pb.PromptResponse, error) {
	msgs, err := s.impl.Prompt(ctx, PromptRequest{Task: taskFromPB(req.Task), Variant: req.Variant,
		Hardware: hardwareFromPB(req.Hardware), Feedback: req.Feedback, History: messagesFromPB(req.History)})
	if err != nil {
		return nil, ToStatus(err)
	}
	return &pb.PromptResponse{Messages: messagesToPB(msgs)}, nil
}

func (s *backendServer) Extract(ctx context.Context, req *pb.ExtractRequest) (*pb.ExtractResponse, error) {
	src, err := s.impl.Extract(ctx, req.Text)
	if err != nil {
		return nil, ToStatus(err)
	}
	return &pb.ExtractResponse{Source: src}, nil
}

func (s *backendServer) Check(ctx context.Context, req *pb.CheckRequest) (*pb.CheckResponse, error) {
	issues, err := s.impl.Check(ctx, req.Source, taskFromPB(req.Task))
	if err != nil {
		return nil, ToStatus(err)
	}
	return &pb.CheckResponse{Issues: issuesToPB(issues)}, nil
}

func (s *backendServer) Recipe(ctx context.Context, req *pb.RecipeRequest) (*pb.BuildRecipe, error) {
	r, err := s.impl.Recipe(ctx, hardwareFromPB(req.Hardware))
	if err != nil {
		return nil, ToStatus(err)
	}
	if r == nil {
		r = &BuildRecipe{}
	}
	return recipeToPB(r), nil
}

type strategyServer struct {
	pb.UnimplementedStrategyServer
	impl   Strategy
	broker *plugin.GRPCBroker
}

func (s *strategyServer) Run(ctx context.Context, req *pb.RunRequest) (*pb.RunResponse, error) {
	conn, err := s.broker.DialWithOptions(req.PlatformBrokerId, DialOptions()...)
	if err != nil {
		return nil, ToStatus(fmt.Errorf("%w: dial the host's platform: %v", ErrUnavailable, err))
	}
	defer conn.Close()
	p := &platformClient{c: pb.NewPlatformClient(conn)}
	res, err := s.impl.Run(ctx, RunRequest{Task: taskFromPB(req.Task), Seed: req.Seed, Study: req.Study,
		Budget: budgetFromPB(req.Budget)}, p)
	if err != nil {
		return nil, ToStatus(err)
	}
	if res == nil {
		res = &RunResult{}
	}
	return &pb.RunResponse{Attempts: int32(res.Attempts), BestEvaluation: res.BestEvaluation, Note: res.Note}, nil
}

type targetServer struct {
	pb.UnimplementedTargetServer
	impl Target
}

func (s *targetServer) Describe(ctx context.Context, _ *pb.DescribeRequest) (*pb.Hardware, error) {
	h, err := s.impl.Describe(ctx)
	if err != nil {
		return nil, ToStatus(err)
	}
	return hardwareToPB(h), nil
}

func (s *targetServer) Compile(ctx context.Context, req *pb.CompileRequest) (*pb.CompileResult, error) {
	c, err := s.impl.Compile(ctx, CompileRequest{Task: taskFromPB(req.Task), Kernel: kernelFromPB(req.Kernel),
		Device: req.Device, Recipe: recipeFromPB(req.Recipe)})
	if err != nil {
		return nil, ToStatus(err)
	}
	return compileToPB(c), nil
}

func (s *targetServer) Evaluate(req *pb.EvaluateRequest, stream pb.Target_EvaluateServer) error {
	progress := func(msg string) { _ = stream.Send(&pb.EvaluateEvent{Event: &pb.EvaluateEvent_Progress{Progress: msg}}) }
	res, err := s.impl.Evaluate(stream.Context(), EvaluateRequest{Task: taskFromPB(req.Task), Kernel: kernelFromPB(req.Kernel),
		Device: req.Device, Config: configFromPB(req.Config), Compiled: compileFromPB(req.Compiled), Recipe: recipeFromPB(req.Recipe)}, progress)
	if err != nil {
		return ToStatus(err)
	}
	return stream.Send(&pb.EvaluateEvent{Event: &pb.EvaluateEvent_Result{Result: resultToPB(res)}})
}

func (s *targetServer) Baseline(req *pb.BaselineRequest, stream pb.Target_BaselineServer) error {
	progress := func(msg string) { _ = stream.Send(&pb.EvaluateEvent{Event: &pb.EvaluateEvent_Progress{Progress: msg}}) }
	res, err := s.impl.Baseline(stream.Context(), BaselineRequest{Task: taskFromPB(req.Task), Device: req.Device, Mode: req.Mode,
		Config: configFromPB(req.Config)}, progress)
	if err != nil {
		return ToStatus(err)
	}
	return stream.Send(&pb.EvaluateEvent{Event: &pb.EvaluateEvent_Result{Result: resultToPB(res)}})
}

func (s *targetServer) Validate(ctx context.Context, req *pb.ValidateRequest) (*pb.Validation, error) {
	v, err := s.impl.Validate(ctx, taskFromPB(req.Task), req.Device, configFromPB(req.Config))
	if err != nil {
		return nil, ToStatus(err)
	}
	return validationToPB(v), nil
}

// platformClient is the Platform a plugin calls.
type platformClient struct{ c pb.PlatformClient }

func (p *platformClient) Prompt(ctx context.Context, variant, feedback string, history []Message) ([]Message, error) {
	resp, err := p.c.Prompt(ctx, &pb.PlatformPromptRequest{Variant: variant, Feedback: feedback, History: messagesToPB(history)})
	if err != nil {
		return nil, FromStatus(err)
	}
	return messagesFromPB(resp.Messages), nil
}

func (p *platformClient) Extract(ctx context.Context, text string) (string, error) {
	resp, err := p.c.Extract(ctx, &pb.ExtractCodeRequest{Text: text})
	if err != nil {
		return "", FromStatus(err)
	}
	return resp.Source, nil
}

func (p *platformClient) Generate(ctx context.Context, req GenerateRequest) (*GenerateResponse, error) {
	resp, err := p.c.Generate(ctx, generateReqToPB(req))
	if err != nil {
		return nil, FromStatus(err)
	}
	return generateRespFromPB(resp), nil
}

func (p *platformClient) Evaluate(ctx context.Context, source, name string) (*Evaluation, error) {
	resp, err := p.c.Evaluate(ctx, &pb.PlatformEvaluateRequest{Source: source, Name: name})
	if err != nil {
		return nil, FromStatus(err)
	}
	return &Evaluation{ID: resp.EvaluationId, Result: resultFromPB(resp.Result), Issues: issuesFromPB(resp.Issues)}, nil
}

func (p *platformClient) Record(ctx context.Context, a Attempt) (string, error) {
	resp, err := p.c.Record(ctx, attemptToPB(a))
	if err != nil {
		return "", FromStatus(err)
	}
	return resp.Id, nil
}

func (p *platformClient) Kernels(ctx context.Context, taskID string, limit int) ([]Kernel, error) {
	return p.StoredKernels(ctx, KernelQuery{Task: taskID, Limit: limit})
}

func (p *platformClient) StoredKernels(ctx context.Context, q KernelQuery) ([]Kernel, error) {
	resp, err := p.c.Kernels(ctx, &pb.KernelsRequest{TaskId: q.Task, Limit: int32(q.Limit), Study: q.Study, Passed: q.Passed})
	if err != nil {
		return nil, FromStatus(err)
	}
	out := make([]Kernel, len(resp.Kernels))
	for i, k := range resp.Kernels {
		out[i] = kernelFromPB(k)
	}
	return out, nil
}

// ---- host side ----------------------------------------------------------------------------------

// Remote is a connected plugin as the host sees it.
type Remote struct {
	conn   *grpc.ClientConn
	broker *plugin.GRPCBroker
	base   pb.BaseClient
	info   Info
}

// Info is what the plugin said it is when it connected.
func (r *Remote) Info() Info { return r.info }

// Configure sends the settings; platform, when not nil, is served to the plugin over the broker.
func (r *Remote) Configure(ctx context.Context, raw json.RawMessage, platform Platform) error {
	req := &pb.ConfigureRequest{ConfigJson: raw}
	if len(raw) == 0 {
		req.ConfigJson = []byte("{}")
	}
	if platform != nil {
		req.PlatformBrokerId = r.ServePlatform(platform)
	}
	_, err := r.base.Configure(ctx, req)
	return FromStatus(err)
}

// ServePlatform serves p to the plugin and returns the broker id to hand it.
func (r *Remote) ServePlatform(p Platform) uint32 {
	id := r.broker.NextId()
	go r.broker.AcceptAndServe(id, func(opts []grpc.ServerOption) *grpc.Server {
		s := grpc.NewServer(append(opts, ServerOptions()...)...)
		pb.RegisterPlatformServer(s, &PlatformServer{Impl: p})
		return s
	})
	return id
}

// Model returns the plugin as a Model (its kind must be model).
func (r *Remote) Model() Model { return &modelClient{r: r, c: pb.NewModelClient(r.conn)} }

// Backend returns the plugin as a Backend.
func (r *Remote) Backend() Backend { return &backendClient{r: r, c: pb.NewBackendClient(r.conn)} }

// Strategy returns the plugin as a Strategy.
func (r *Remote) Strategy() Strategy { return &strategyClient{r: r, c: pb.NewStrategyClient(r.conn)} }

// Target returns the plugin as a Target.
func (r *Remote) Target() Target { return &targetClient{r: r, c: pb.NewTargetClient(r.conn)} }

type remoteBase struct{ r *Remote }

func (b remoteBase) Info() Info { return b.r.info }

func (b remoteBase) Configure(ctx context.Context, c Configuration) error {
	return b.r.Configure(ctx, c.Raw, c.Platform)
}

type modelClient struct {
	r *Remote
	c pb.ModelClient
}

func (m *modelClient) Info() Info { return m.r.info }
func (m *modelClient) Configure(ctx context.Context, c Configuration) error {
	return remoteBase{m.r}.Configure(ctx, c)
}

func (m *modelClient) Generate(ctx context.Context, req GenerateRequest) (*GenerateResponse, error) {
	resp, err := m.c.Generate(ctx, generateReqToPB(req))
	if err != nil {
		return nil, FromStatus(err)
	}
	return generateRespFromPB(resp), nil
}

type backendClient struct {
	r *Remote
	c pb.BackendClient
}

func (b *backendClient) Info() Info { return b.r.info }
func (b *backendClient) Configure(ctx context.Context, c Configuration) error {
	return remoteBase{b.r}.Configure(ctx, c)
}

func (b *backendClient) Prompt(ctx context.Context, req PromptRequest) ([]Message, error) {
	resp, err := b.c.Prompt(ctx, &pb.PromptRequest{Task: taskToPB(req.Task), Variant: req.Variant, Hardware: hardwareToPB(req.Hardware),
		Feedback: req.Feedback, History: messagesToPB(req.History)})
	if err != nil {
		return nil, FromStatus(err)
	}
	return messagesFromPB(resp.Messages), nil
}

func (b *backendClient) Extract(ctx context.Context, text string) (string, error) {
	resp, err := b.c.Extract(ctx, &pb.ExtractRequest{Text: text})
	if err != nil {
		return "", FromStatus(err)
	}
	return resp.Source, nil
}

func (b *backendClient) Check(ctx context.Context, source string, task Task) ([]Issue, error) {
	resp, err := b.c.Check(ctx, &pb.CheckRequest{Source: source, Task: taskToPB(task)})
	if err != nil {
		return nil, FromStatus(err)
	}
	return issuesFromPB(resp.Issues), nil
}

func (b *backendClient) Recipe(ctx context.Context, hw *Hardware) (*BuildRecipe, error) {
	resp, err := b.c.Recipe(ctx, &pb.RecipeRequest{Hardware: hardwareToPB(hw)})
	if err != nil {
		return nil, FromStatus(err)
	}
	return recipeFromPB(resp), nil
}

type strategyClient struct {
	r *Remote
	c pb.StrategyClient
}

func (s *strategyClient) Info() Info { return s.r.info }
func (s *strategyClient) Configure(ctx context.Context, c Configuration) error {
	return remoteBase{s.r}.Configure(ctx, c)
}

func (s *strategyClient) Run(ctx context.Context, req RunRequest, p Platform) (*RunResult, error) {
	id := s.r.ServePlatform(p)
	resp, err := s.c.Run(ctx, &pb.RunRequest{Task: taskToPB(req.Task), Seed: req.Seed, Study: req.Study, PlatformBrokerId: id,
		Budget: budgetToPB(req.Budget)})
	if err != nil {
		return nil, FromStatus(err)
	}
	return &RunResult{Attempts: int(resp.Attempts), BestEvaluation: resp.BestEvaluation, Note: resp.Note}, nil
}

type targetClient struct {
	r *Remote
	c pb.TargetClient
}

func (t *targetClient) Info() Info { return t.r.info }
func (t *targetClient) Configure(ctx context.Context, c Configuration) error {
	return remoteBase{t.r}.Configure(ctx, c)
}

func (t *targetClient) Describe(ctx context.Context) (*Hardware, error) {
	resp, err := t.c.Describe(ctx, &pb.DescribeRequest{})
	if err != nil {
		return nil, FromStatus(err)
	}
	return hardwareFromPB(resp), nil
}

func (t *targetClient) Compile(ctx context.Context, req CompileRequest) (*CompileResult, error) {
	resp, err := t.c.Compile(ctx, &pb.CompileRequest{Task: taskToPB(req.Task), Kernel: kernelToPB(req.Kernel), Device: req.Device, Recipe: recipeToPB(req.Recipe)})
	if err != nil {
		return nil, FromStatus(err)
	}
	return compileFromPB(resp), nil
}

type eventStream interface {
	Recv() (*pb.EvaluateEvent, error)
}

func drain(s eventStream, progress Progress) (*Result, error) {
	for {
		ev, err := s.Recv()
		if err == io.EOF {
			return nil, fmt.Errorf("%w: the target ended the stream without a result", ErrUnavailable)
		}
		if err != nil {
			return nil, FromStatus(err)
		}
		switch e := ev.Event.(type) {
		case *pb.EvaluateEvent_Progress:
			if progress != nil {
				progress(e.Progress)
			}
		case *pb.EvaluateEvent_Result:
			return resultFromPB(e.Result), nil
		}
	}
}

func (t *targetClient) Evaluate(ctx context.Context, req EvaluateRequest, progress Progress) (*Result, error) {
	s, err := t.c.Evaluate(ctx, &pb.EvaluateRequest{Task: taskToPB(req.Task), Kernel: kernelToPB(req.Kernel), Device: req.Device,
		Config: configToPB(req.Config), Compiled: compileToPB(req.Compiled), Recipe: recipeToPB(req.Recipe)})
	if err != nil {
		return nil, FromStatus(err)
	}
	res, err := drain(s, progress)
	if res != nil {
		res.Task.Source, res.Kernel.Source = req.Task.Source, req.Kernel.Source
	}
	return res, err
}

func (t *targetClient) Baseline(ctx context.Context, req BaselineRequest, progress Progress) (*Result, error) {
	s, err := t.c.Baseline(ctx, &pb.BaselineRequest{Task: taskToPB(req.Task), Device: req.Device, Mode: req.Mode, Config: configToPB(req.Config)})
	if err != nil {
		return nil, FromStatus(err)
	}
	return drain(s, progress)
}

func (t *targetClient) Validate(ctx context.Context, task Task, device string, cfg Config) (*Validation, error) {
	resp, err := t.c.Validate(ctx, &pb.ValidateRequest{Task: taskToPB(task), Device: device, Config: configToPB(cfg)})
	if err != nil {
		return nil, FromStatus(err)
	}
	return validationFromPB(resp), nil
}

// PlatformServer serves a Platform implementation (the host's) over gRPC.
type PlatformServer struct {
	pb.UnimplementedPlatformServer
	Impl Platform
}

// Prompt implements the Platform service.
func (s *PlatformServer) Prompt(ctx context.Context, req *pb.PlatformPromptRequest) (*pb.PlatformPromptResponse, error) {
	msgs, err := s.Impl.Prompt(ctx, req.Variant, req.Feedback, messagesFromPB(req.History))
	if err != nil {
		return nil, ToStatus(err)
	}
	return &pb.PlatformPromptResponse{Messages: messagesToPB(msgs)}, nil
}

// Extract implements the Platform service.
func (s *PlatformServer) Extract(ctx context.Context, req *pb.ExtractCodeRequest) (*pb.ExtractCodeResponse, error) {
	src, err := s.Impl.Extract(ctx, req.Text)
	if err != nil {
		return nil, ToStatus(err)
	}
	return &pb.ExtractCodeResponse{Source: src}, nil
}

// Generate implements the Platform service.
func (s *PlatformServer) Generate(ctx context.Context, req *pb.GenerateRequest) (*pb.GenerateResponse, error) {
	resp, err := s.Impl.Generate(ctx, generateReqFromPB(req))
	if err != nil {
		return nil, ToStatus(err)
	}
	return generateRespToPB(resp), nil
}

// Evaluate implements the Platform service.
func (s *PlatformServer) Evaluate(ctx context.Context, req *pb.PlatformEvaluateRequest) (*pb.PlatformEvaluateResponse, error) {
	ev, err := s.Impl.Evaluate(ctx, req.Source, req.Name)
	if err != nil {
		return nil, ToStatus(err)
	}
	return &pb.PlatformEvaluateResponse{EvaluationId: ev.ID, Result: resultToPB(ev.Result), Issues: issuesToPB(ev.Issues)}, nil
}

// Record implements the Platform service.
func (s *PlatformServer) Record(ctx context.Context, a *pb.Attempt) (*pb.RecordResponse, error) {
	id, err := s.Impl.Record(ctx, attemptFromPB(a))
	if err != nil {
		return nil, ToStatus(err)
	}
	return &pb.RecordResponse{Id: id}, nil
}

// Kernels implements the Platform service.
func (s *PlatformServer) Kernels(ctx context.Context, req *pb.KernelsRequest) (*pb.KernelsResponse, error) {
	ks, err := s.Impl.StoredKernels(ctx, KernelQuery{Task: req.TaskId, Limit: int(req.Limit), Study: req.Study, Passed: req.Passed})
	if err != nil {
		return nil, ToStatus(err)
	}
	out := &pb.KernelsResponse{}
	for _, k := range ks {
		out.Kernels = append(out.Kernels, kernelToPB(k))
	}
	return out, nil
}
