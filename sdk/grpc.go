package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// GRPCPlugin serves an implementation from a plugin process.
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl Plugin
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

// GRPCClient is the host's half, which lives with the host: the SDK only serves plugins.
func (g *GRPCPlugin) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, errors.New("sdk: a plugin binary dials no plugin; kbplatform's host does")
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
	resp, err := s.impl.Generate(ctx, GenerateReqFromPB(req))
	if err != nil {
		return nil, ToStatus(err)
	}
	if resp == nil {
		return nil, ToStatus(errors.New("model returned no response"))
	}
	return GenerateRespToPB(resp), nil
}

type backendServer struct {
	pb.UnimplementedBackendServer
	impl Backend
}

func (s *backendServer) Prompt(ctx context.Context, req *pb.PromptRequest) (*pb.PromptResponse, error) {
	msgs, err := s.impl.Prompt(ctx, PromptRequest{Task: taskFromPB(req.Task), Variant: req.Variant,
		Hardware: HardwareFromPB(req.Hardware), Feedback: req.Feedback, History: MessagesFromPB(req.History)})
	if err != nil {
		return nil, ToStatus(err)
	}
	return &pb.PromptResponse{Messages: MessagesToPB(msgs)}, nil
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
	return &pb.CheckResponse{Issues: IssuesToPB(issues)}, nil
}

func (s *backendServer) Recipe(ctx context.Context, req *pb.RecipeRequest) (*pb.BuildRecipe, error) {
	r, err := s.impl.Recipe(ctx, HardwareFromPB(req.Hardware))
	if err != nil {
		return nil, ToStatus(err)
	}
	if r == nil {
		r = &BuildRecipe{}
	}
	return RecipeToPB(r), nil
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
	return HardwareToPB(h), nil
}

func (s *targetServer) Compile(ctx context.Context, req *pb.CompileRequest) (*pb.CompileResult, error) {
	c, err := s.impl.Compile(ctx, CompileRequest{Task: taskFromPB(req.Task), Kernel: kernelFromPB(req.Kernel),
		Device: req.Device, Recipe: RecipeFromPB(req.Recipe)})
	if err != nil {
		return nil, ToStatus(err)
	}
	return CompileToPB(c), nil
}

func (s *targetServer) Evaluate(req *pb.EvaluateRequest, stream pb.Target_EvaluateServer) error {
	progress := func(msg string) { _ = stream.Send(&pb.EvaluateEvent{Event: &pb.EvaluateEvent_Progress{Progress: msg}}) }
	res, err := s.impl.Evaluate(stream.Context(), EvaluateRequest{Task: taskFromPB(req.Task), Kernel: kernelFromPB(req.Kernel),
		Device: req.Device, Config: configFromPB(req.Config), Compiled: CompileFromPB(req.Compiled), Recipe: RecipeFromPB(req.Recipe)}, progress)
	if err != nil {
		return ToStatus(err)
	}
	return stream.Send(&pb.EvaluateEvent{Event: &pb.EvaluateEvent_Result{Result: ResultToPB(res)}})
}

func (s *targetServer) Baseline(req *pb.BaselineRequest, stream pb.Target_BaselineServer) error {
	progress := func(msg string) { _ = stream.Send(&pb.EvaluateEvent{Event: &pb.EvaluateEvent_Progress{Progress: msg}}) }
	res, err := s.impl.Baseline(stream.Context(), BaselineRequest{Task: taskFromPB(req.Task), Device: req.Device, Mode: req.Mode,
		Config: configFromPB(req.Config)}, progress)
	if err != nil {
		return ToStatus(err)
	}
	return stream.Send(&pb.EvaluateEvent{Event: &pb.EvaluateEvent_Result{Result: ResultToPB(res)}})
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
	resp, err := p.c.Prompt(ctx, &pb.PlatformPromptRequest{Variant: variant, Feedback: feedback, History: MessagesToPB(history)})
	if err != nil {
		return nil, FromStatus(err)
	}
	return MessagesFromPB(resp.Messages), nil
}

func (p *platformClient) Extract(ctx context.Context, text string) (string, error) {
	resp, err := p.c.Extract(ctx, &pb.ExtractCodeRequest{Text: text})
	if err != nil {
		return "", FromStatus(err)
	}
	return resp.Source, nil
}

func (p *platformClient) Generate(ctx context.Context, req GenerateRequest) (*GenerateResponse, error) {
	resp, err := p.c.Generate(ctx, GenerateReqToPB(req))
	if err != nil {
		return nil, FromStatus(err)
	}
	return GenerateRespFromPB(resp), nil
}

func (p *platformClient) Evaluate(ctx context.Context, source, name string) (*Evaluation, error) {
	resp, err := p.c.Evaluate(ctx, &pb.PlatformEvaluateRequest{Source: source, Name: name})
	if err != nil {
		return nil, FromStatus(err)
	}
	return &Evaluation{ID: resp.EvaluationId, Result: ResultFromPB(resp.Result), Issues: IssuesFromPB(resp.Issues)}, nil
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
