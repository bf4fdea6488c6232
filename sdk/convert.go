package sdk

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/kbplatform/kbplatform/proto/kbplatform/plugin/v1"
)

// Conversions between the SDK's Go types and the protocol's messages. Each pair round-trips. The
// exported ones are the protocol's Go binding for both of its sides: the SDK's servers (in this
// package) and kbplatform's host client (internal/pluginhost), so the two cannot drift apart.

// TaskToPB converts a Task to its protocol message.
func TaskToPB(t Task) *pb.Task {
	out := &pb.Task{Id: t.ID, Hash: t.Hash, Size: t.Size, Source: t.Source, Distributions: t.Distributions,
		Strides: t.Strides, TimeoutNs: int64(t.Timeout), Name: t.Name, Level: int32(t.Level)}
	if t.Tolerance != nil {
		out.Tolerance = &pb.Tolerance{Atol: t.Tolerance.Atol, Rtol: t.Tolerance.Rtol}
	}
	return out
}

func taskFromPB(t *pb.Task) Task {
	if t == nil {
		return Task{}
	}
	out := Task{ID: t.Id, Hash: t.Hash, Size: t.Size, Source: t.Source, Distributions: t.Distributions,
		Strides: t.Strides, Timeout: time.Duration(t.TimeoutNs), Name: t.Name, Level: int(t.Level)}
	if t.Tolerance != nil {
		out.Tolerance = &Tolerance{Atol: t.Tolerance.Atol, Rtol: t.Tolerance.Rtol}
	}
	return out
}

// KernelToPB converts a Kernel to its protocol message.
func KernelToPB(k Kernel) *pb.Kernel { return &pb.Kernel{Hash: k.Hash, Source: k.Source, Name: k.Name} }

func kernelFromPB(k *pb.Kernel) Kernel {
	if k == nil {
		return Kernel{}
	}
	return Kernel{Hash: k.Hash, Source: k.Source, Name: k.Name}
}

// ConfigToPB converts a Config to its protocol message.
func ConfigToPB(c Config) *pb.ContractConfig {
	return &pb.ContractConfig{Seeds: int32(c.Seeds), Warmup: int32(c.Warmup), TimedCalls: int32(c.TimedCalls),
		CheckCalls: int32(c.CheckCalls), NoopCalls: int32(c.NoopCalls), FlushCache: c.FlushCache, Poison: c.Poison,
		CpuThreads: int32(c.CPUThreads), Seed: c.Seed, TimeoutNs: int64(c.Timeout), CallTimeoutNs: int64(c.CallTimeout),
		CompileTimeoutNs: int64(c.CompileTimeout), LogLimit: int32(c.LogLimit), KeepSamples: c.KeepSamples}
}

func configFromPB(c *pb.ContractConfig) Config {
	if c == nil {
		return DefaultConfig()
	}
	return Config{Seeds: int(c.Seeds), Warmup: int(c.Warmup), TimedCalls: int(c.TimedCalls), CheckCalls: int(c.CheckCalls),
		NoopCalls: int(c.NoopCalls), FlushCache: c.FlushCache, Poison: c.Poison, CPUThreads: int(c.CpuThreads), Seed: c.Seed,
		Timeout: time.Duration(c.TimeoutNs), CallTimeout: time.Duration(c.CallTimeoutNs),
		CompileTimeout: time.Duration(c.CompileTimeoutNs), LogLimit: int(c.LogLimit), KeepSamples: c.KeepSamples}
}

func statsToPB(s Stats) *pb.Stats {
	return &pb.Stats{N: int32(s.N), MedianMs: s.Median, MeanMs: s.Mean, MinMs: s.Min, MaxMs: s.Max, Q1Ms: s.Q1,
		Q3Ms: s.Q3, IqrMs: s.IQR, StdMs: s.Std, Cv: s.CV}
}

func statsFromPB(s *pb.Stats) Stats {
	if s == nil {
		return Stats{}
	}
	return Stats{N: int(s.N), Median: s.MedianMs, Mean: s.MeanMs, Min: s.MinMs, Max: s.MaxMs, Q1: s.Q1Ms, Q3: s.Q3Ms,
		IQR: s.IqrMs, Std: s.StdMs, CV: s.Cv}
}

// CompileToPB converts a CompileResult to its protocol message.
func CompileToPB(c *CompileResult) *pb.CompileResult {
	if c == nil {
		return nil
	}
	return &pb.CompileResult{Ok: c.OK, ErrorClass: c.ErrorClass, Message: c.Message, Traceback: c.Traceback, Log: c.Log,
		Builds: int32(c.Builds), CacheHits: int32(c.CacheHits), DurationNs: int64(c.Duration)}
}

// CompileFromPB converts a CompileResult from its protocol message.
func CompileFromPB(c *pb.CompileResult) *CompileResult {
	if c == nil {
		return nil
	}
	return &CompileResult{OK: c.Ok, ErrorClass: c.ErrorClass, Message: c.Message, Traceback: c.Traceback, Log: c.Log,
		Builds: int(c.Builds), CacheHits: int(c.CacheHits), Duration: time.Duration(c.DurationNs)}
}

func structToPB(m map[string]any) *structpb.Struct {
	if m == nil {
		return nil
	}
	s, err := structpb.NewStruct(jsonSafe(m).(map[string]any))
	if err != nil {
		return nil
	}
	return s
}

// jsonSafe converts values structpb cannot hold (ints of every width are fine; others go to
// strings; structpb refuses invalid UTF-8, which would drop the whole struct).
func jsonSafe(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[ValidUTF8(k)] = jsonSafe(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonSafe(e)
		}
		return out
	case []int:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = e
		}
		return out
	case []string:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = ValidUTF8(e)
		}
		return out
	case string:
		return ValidUTF8(x)
	case nil, bool, float64, float32, int, int32, int64, uint32, uint64:
		return x
	}
	return ValidUTF8(fmtAny(v))
}

func structFromPB(s *structpb.Struct) map[string]any {
	if s == nil {
		return nil
	}
	return s.AsMap()
}

// ResultToPB converts a Result to its protocol message.
func ResultToPB(r *Result) *pb.Result {
	if r == nil {
		return nil
	}
	t := TaskToPB(r.Task)
	t.Source = ""
	k := KernelToPB(r.Kernel)
	k.Source = ""
	out := &pb.Result{Contract: r.Contract, Task: t, Kernel: k, Device: r.Device, Verdict: r.Verdict,
		ErrorClass: r.ErrorClass, Phase: r.Phase, Message: r.Message, Traceback: r.Traceback, Log: r.Log,
		Tampered: r.Tampered, Warnings: r.Warnings, Fingerprint: structToPB(r.Fingerprint), Config: ConfigToPB(r.Config),
		Compile: CompileToPB(r.Compile), ModelCompileS: r.ModelCompileS, Flags: flagsToPB(r.Flags)}
	if ph := r.Phases; ph != nil {
		out.Phases = &pb.Phases{WaitDeviceS: ph.WaitDevice, CandidateStartS: ph.CandidateStart, ReferenceReadyS: ph.ReferenceReady,
			LoadS: ph.Load, TrialsS: ph.Trials, TimingS: ph.Timing, RechecksS: ph.Rechecks, GpuWorkS: ph.GPUWork, TotalS: ph.Total,
			ReferenceOps: workerOpsToPB(ph.ReferenceOps), CandidateOps: workerOpsToPB(ph.CandidateOps)}
	}
	if m := r.Memory; m != nil {
		out.Memory = &pb.MemoryUse{FootprintBytes: m.Footprint, ReferencePeakBytes: m.ReferencePeak, CandidatePeakBytes: m.CandidatePeak,
			PeakBytes: m.Peak, DeviceTotalBytes: m.DeviceTotal, EvidencePeakBytes: m.EvidencePeak,
			ReferenceAllocatedBytes: m.ReferenceAllocated, CandidateAllocatedBytes: m.CandidateAllocated, HarnessBytes: m.Harness}
	}
	if pr := r.Profile; pr != nil {
		out.Profile = &pb.Profile{Tool: pr.Tool, TotalUs: pr.TotalUS}
		for _, k := range pr.Kernels {
			out.Profile.Kernels = append(out.Profile.Kernels, &pb.KernelTime{Name: k.Name, Calls: k.Calls, TotalUs: k.TotalUS, Share: k.Share, Custom: k.Custom})
		}
	}
	if sb := r.Sandbox; sb != nil {
		out.Sandbox = &pb.Sandbox{LandlockAbi: int32(sb.Landlock), Network: sb.Network, Seccomp: sb.Seccomp, Env: sb.Env, Scoped: sb.Scoped, Missing: sb.Missing, Tasks: sb.Tasks}
	}
	if !r.StartedAt.IsZero() {
		out.StartedAt = timestamppb.New(r.StartedAt)
	}
	if !r.FinishedAt.IsZero() {
		out.FinishedAt = timestamppb.New(r.FinishedAt)
	}
	for _, tr := range r.Trials {
		p := &pb.Trial{Seed: int64(tr.Seed), Dist: tr.Dist, Ok: tr.OK, Kind: tr.Kind, Message: tr.Message, Repeated: tr.Repeated, Consistent: tr.Consistent, Added: tr.Added}
		for _, i := range tr.InputChanged {
			p.InputChanged = append(p.InputChanged, int32(i))
		}
		out.Trials = append(out.Trials, p)
	}
	if m := r.Mismatch; m != nil {
		out.Mismatch = &pb.Mismatch{Phase: m.Phase, Seed: int64(m.Seed), Dist: m.Dist, Call: int32(m.Call), Kind: m.Kind, Message: m.Message, Detail: structToPB(m.Detail)}
	}
	if tm := r.Timing; tm != nil {
		out.Timing = &pb.Timing{Candidate: statsToPB(tm.Candidate), Reference: statsToPB(tm.Reference),
			CandidateWall: statsToPB(tm.CandidateWall), ReferenceWall: statsToPB(tm.ReferenceWall), Overhead: statsToPB(tm.Overhead),
			Speedup: tm.Speedup, Checked: int32(tm.Checked), SamplesMs: tm.Samples, ReferenceSamplesMs: tm.RefSamples, Warmup: int32(tm.Warmup),
			SpeedupLow: tm.SpeedupLow, SpeedupHigh: tm.SpeedupHigh, SpeedupHalves: tm.SpeedupHalves}
	}
	return out
}

// ResultFromPB converts a Result from its protocol message.
func ResultFromPB(p *pb.Result) *Result {
	if p == nil {
		return nil
	}
	r := &Result{Contract: p.Contract, Task: taskFromPB(p.Task), Kernel: kernelFromPB(p.Kernel), Device: p.Device,
		Verdict: p.Verdict, ErrorClass: p.ErrorClass, Phase: p.Phase, Message: p.Message, Traceback: p.Traceback, Log: p.Log,
		Tampered: p.Tampered, Warnings: p.Warnings, Config: configFromPB(p.Config), Compile: CompileFromPB(p.Compile),
		ModelCompileS: p.ModelCompileS, Flags: flagsFromPB(p.Flags)}
	if ph := p.Phases; ph != nil {
		r.Phases = &Phases{WaitDevice: ph.WaitDeviceS, CandidateStart: ph.CandidateStartS, ReferenceReady: ph.ReferenceReadyS,
			Load: ph.LoadS, Trials: ph.TrialsS, Timing: ph.TimingS, Rechecks: ph.RechecksS, GPUWork: ph.GpuWorkS, Total: ph.TotalS,
			ReferenceOps: workerOpsFromPB(ph.ReferenceOps), CandidateOps: workerOpsFromPB(ph.CandidateOps)}
	}
	if m := p.Memory; m != nil {
		r.Memory = &MemoryUse{Footprint: m.FootprintBytes, ReferencePeak: m.ReferencePeakBytes, CandidatePeak: m.CandidatePeakBytes,
			Peak: m.PeakBytes, DeviceTotal: m.DeviceTotalBytes, EvidencePeak: m.EvidencePeakBytes,
			ReferenceAllocated: m.ReferenceAllocatedBytes, CandidateAllocated: m.CandidateAllocatedBytes, Harness: m.HarnessBytes}
	}
	if pr := p.Profile; pr != nil {
		r.Profile = &Profile{Tool: pr.Tool, TotalUS: pr.TotalUs}
		for _, k := range pr.Kernels {
			r.Profile.Kernels = append(r.Profile.Kernels, KernelTime{Name: k.Name, Calls: k.Calls, TotalUS: k.TotalUs, Share: k.Share, Custom: k.Custom})
		}
	}
	if sb := p.Sandbox; sb != nil {
		r.Sandbox = &Sandbox{Landlock: int(sb.LandlockAbi), Network: sb.Network, Seccomp: sb.Seccomp, Env: sb.Env, Scoped: sb.Scoped, Missing: sb.Missing, Tasks: sb.Tasks}
	}
	if fp := structFromPB(p.Fingerprint); fp != nil {
		r.Fingerprint = Fingerprint(fp)
	}
	if p.StartedAt != nil {
		r.StartedAt = p.StartedAt.AsTime()
	}
	if p.FinishedAt != nil {
		r.FinishedAt = p.FinishedAt.AsTime()
	}
	for _, tr := range p.Trials {
		t := Trial{Seed: int(tr.Seed), Dist: tr.Dist, OK: tr.Ok, Kind: tr.Kind, Message: tr.Message, Repeated: tr.Repeated, Consistent: tr.Consistent, Added: tr.Added}
		for _, i := range tr.InputChanged {
			t.InputChanged = append(t.InputChanged, int(i))
		}
		r.Trials = append(r.Trials, t)
	}
	if m := p.Mismatch; m != nil {
		r.Mismatch = &Mismatch{Phase: m.Phase, Seed: int(m.Seed), Dist: m.Dist, Call: int(m.Call), Kind: m.Kind, Message: m.Message, Detail: structFromPB(m.Detail)}
	}
	if tm := p.Timing; tm != nil {
		r.Timing = &Timing{Candidate: statsFromPB(tm.Candidate), Reference: statsFromPB(tm.Reference),
			CandidateWall: statsFromPB(tm.CandidateWall), ReferenceWall: statsFromPB(tm.ReferenceWall), Overhead: statsFromPB(tm.Overhead),
			Speedup: tm.Speedup, Checked: int(tm.Checked), Samples: tm.SamplesMs, RefSamples: tm.ReferenceSamplesMs, Warmup: int(tm.Warmup),
			SpeedupLow: tm.SpeedupLow, SpeedupHigh: tm.SpeedupHigh, SpeedupHalves: tm.SpeedupHalves}
	}
	return r
}

func validationToPB(v *Validation) *pb.Validation {
	if v == nil {
		return nil
	}
	out := &pb.Validation{TaskId: v.TaskID, Size: v.Size, Device: v.Device, Ok: v.OK, Output: v.Output, Errors: v.Errors, Warnings: v.Warnings}
	for _, p := range v.Probes {
		out.Probes = append(out.Probes, &pb.ProbedDistribution{Dist: p.Dist, Kept: p.Kept, Reason: p.Reason})
	}
	return out
}

// ValidationFromPB converts a Validation from its protocol message.
func ValidationFromPB(v *pb.Validation) *Validation {
	if v == nil {
		return nil
	}
	out := &Validation{TaskID: v.TaskId, Size: v.Size, Device: v.Device, OK: v.Ok, Output: v.Output, Errors: v.Errors, Warnings: v.Warnings}
	for _, p := range v.Probes {
		out.Probes = append(out.Probes, ProbedDistribution{Dist: p.Dist, Kept: p.Kept, Reason: p.Reason})
	}
	return out
}

// MessagesToPB converts messages to their protocol messages.
func MessagesToPB(ms []Message) []*pb.ChatMessage {
	out := make([]*pb.ChatMessage, len(ms))
	for i, m := range ms {
		out[i] = &pb.ChatMessage{Role: m.Role, Content: m.Content}
	}
	return out
}

// MessagesFromPB converts messages from their protocol messages.
func MessagesFromPB(ms []*pb.ChatMessage) []Message {
	if len(ms) == 0 {
		return nil
	}
	out := make([]Message, len(ms))
	for i, m := range ms {
		out[i] = Message{Role: m.Role, Content: m.Content}
	}
	return out
}

// HardwareToPB converts a Hardware to its protocol message.
func HardwareToPB(h *Hardware) *pb.Hardware {
	if h == nil {
		return nil
	}
	out := &pb.Hardware{Target: h.Target, Fingerprint: structToPB(h.Fingerprint), Capabilities: h.Capabilities}
	for _, d := range h.Devices {
		out.Devices = append(out.Devices, &pb.Device{Name: d.Name, Kind: d.Kind, Model: d.Model, MemoryBytes: d.MemoryBytes,
			ComputeCapability: d.ComputeCapability, Multiprocessors: int32(d.Multiprocessors), Driver: d.Driver})
	}
	return out
}

// HardwareFromPB converts a Hardware from its protocol message.
func HardwareFromPB(h *pb.Hardware) *Hardware {
	if h == nil {
		return nil
	}
	out := &Hardware{Target: h.Target, Capabilities: h.Capabilities}
	if fp := structFromPB(h.Fingerprint); fp != nil {
		out.Fingerprint = Fingerprint(fp)
	}
	for _, d := range h.Devices {
		out.Devices = append(out.Devices, Device{Name: d.Name, Kind: d.Kind, Model: d.Model, MemoryBytes: d.MemoryBytes,
			ComputeCapability: d.ComputeCapability, Multiprocessors: int(d.Multiprocessors), Driver: d.Driver})
	}
	return out
}

// RecipeToPB converts a BuildRecipe to its protocol message.
func RecipeToPB(r *BuildRecipe) *pb.BuildRecipe {
	if r == nil {
		return nil
	}
	return &pb.BuildRecipe{Env: r.Env, Cflags: r.CFlags, CudaCflags: r.CUDAFlags, IncludePaths: r.IncludePaths, Ldflags: r.LDFlags}
}

// RecipeFromPB converts a BuildRecipe from its protocol message.
func RecipeFromPB(r *pb.BuildRecipe) *BuildRecipe {
	if r == nil {
		return nil
	}
	return &BuildRecipe{Env: r.Env, CFlags: r.Cflags, CUDAFlags: r.CudaCflags, IncludePaths: r.IncludePaths, LDFlags: r.Ldflags}
}

// IssuesToPB converts issues to their protocol messages.
func IssuesToPB(is []Issue) []*pb.Issue {
	out := make([]*pb.Issue, len(is))
	for i, x := range is {
		out[i] = &pb.Issue{Severity: x.Severity, Code: x.Code, Message: x.Message, Flag: x.Flag}
	}
	return out
}

// IssuesFromPB converts issues from their protocol messages.
func IssuesFromPB(is []*pb.Issue) []Issue {
	out := make([]Issue, len(is))
	for i, x := range is {
		out[i] = Issue{Severity: x.Severity, Code: x.Code, Message: x.Message, Flag: x.Flag}
	}
	return out
}

// GenerateReqToPB converts a GenerateRequest to its protocol message.
func GenerateReqToPB(r GenerateRequest) *pb.GenerateRequest {
	return &pb.GenerateRequest{Messages: MessagesToPB(r.Messages), N: int32(r.N), TaskId: r.TaskID,
		Params: &pb.SamplingParams{Temperature: r.Params.Temperature, TopP: r.Params.TopP, MaxTokens: int32(r.Params.MaxTokens),
			Seed: r.Params.Seed, Stop: r.Params.Stop}}
}

// GenerateReqFromPB converts a GenerateRequest from its protocol message.
func GenerateReqFromPB(r *pb.GenerateRequest) GenerateRequest {
	out := GenerateRequest{Messages: MessagesFromPB(r.Messages), N: int(r.N), TaskID: r.TaskId}
	if p := r.Params; p != nil {
		out.Params = SamplingParams{Temperature: p.Temperature, TopP: p.TopP, MaxTokens: int(p.MaxTokens), Seed: p.Seed, Stop: p.Stop}
	}
	return out
}

// GenerateRespToPB converts a GenerateResponse to its protocol message.
func GenerateRespToPB(r *GenerateResponse) *pb.GenerateResponse {
	out := &pb.GenerateResponse{Model: r.Model, CallIds: r.CallIDs, Usage: &pb.Usage{PromptTokens: r.Usage.PromptTokens, CompletionTokens: r.Usage.CompletionTokens,
		ReasoningTokens: r.Usage.ReasoningTokens, CachedPromptTokens: r.Usage.CachedPromptTokens}}
	for _, c := range r.Completions {
		out.Completions = append(out.Completions, &pb.Completion{Text: c.Text, FinishReason: c.FinishReason, Reasoning: c.Reasoning})
	}
	return out
}

// GenerateRespFromPB converts a GenerateResponse from its protocol message.
func GenerateRespFromPB(r *pb.GenerateResponse) *GenerateResponse {
	out := &GenerateResponse{Model: r.Model, CallIDs: r.CallIds}
	if r.Usage != nil {
		out.Usage = Usage{PromptTokens: r.Usage.PromptTokens, CompletionTokens: r.Usage.CompletionTokens,
			ReasoningTokens: r.Usage.ReasoningTokens, CachedPromptTokens: r.Usage.CachedPromptTokens}
	}
	for _, c := range r.Completions {
		out.Completions = append(out.Completions, Completion{Text: c.Text, FinishReason: c.FinishReason, Reasoning: c.Reasoning})
	}
	return out
}

func attemptToPB(a Attempt) *pb.Attempt {
	return &pb.Attempt{Step: int32(a.Step), ParentStep: int32(a.ParentStep), EvaluationId: a.EvaluationID, KernelHash: a.KernelHash,
		Completion: a.Completion, FeedbackKind: a.FeedbackKind, Note: a.Note, PromptTokens: a.PromptTokens, CompletionTokens: a.CompletionTokens,
		CallIds: a.CallIDs, Failure: a.Failure, Turn: int32(a.Turn), Sample: int32(a.Sample), Feedback: a.Feedback,
		Prompt: MessagesToPB(a.Prompt), Temperature: a.Temperature}
}

// AttemptFromPB converts an Attempt from its protocol message.
func AttemptFromPB(a *pb.Attempt) Attempt {
	return Attempt{Step: int(a.Step), ParentStep: int(a.ParentStep), EvaluationID: a.EvaluationId, KernelHash: a.KernelHash,
		Completion: a.Completion, FeedbackKind: a.FeedbackKind, Note: a.Note, PromptTokens: a.PromptTokens, CompletionTokens: a.CompletionTokens,
		CallIDs: a.CallIds, Failure: a.Failure, Turn: int(a.Turn), Sample: int(a.Sample), Feedback: a.Feedback,
		Prompt: MessagesFromPB(a.Prompt), Temperature: a.Temperature}
}

func fmtAny(v any) string { return fmt.Sprint(v) }

func flagsToPB(fs []Flag) []*pb.Flag {
	if len(fs) == 0 {
		return nil
	}
	out := make([]*pb.Flag, len(fs))
	for i, f := range fs {
		out[i] = &pb.Flag{Name: f.Name, Reason: f.Reason}
	}
	return out
}

func flagsFromPB(fs []*pb.Flag) []Flag {
	if len(fs) == 0 {
		return nil
	}
	out := make([]Flag, len(fs))
	for i, f := range fs {
		out[i] = Flag{Name: f.Name, Reason: f.Reason}
	}
	return out
}

// BudgetToPB converts a Budget to its protocol message.
func BudgetToPB(b Budget) *pb.Budget {
	return &pb.Budget{Generations: int32(b.Generations), Evaluations: int32(b.Evaluations), Tokens: b.Tokens, Seconds: b.Seconds, CostUsd: b.CostUSD}
}

func budgetFromPB(b *pb.Budget) Budget {
	return Budget{Generations: int(b.GetGenerations()), Evaluations: int(b.GetEvaluations()), Tokens: b.GetTokens(), Seconds: b.GetSeconds(), CostUSD: b.GetCostUsd()}
}

func workerOpsToPB(ops map[string]WorkerOp) map[string]*pb.WorkerOp {
	if len(ops) == 0 {
		return nil
	}
	out := make(map[string]*pb.WorkerOp, len(ops))
	for k, o := range ops {
		out[k] = &pb.WorkerOp{Calls: int64(o.Calls), Seconds: o.Seconds, PeakBytes: o.PeakBytes, PeakAllocatedBytes: o.PeakAllocatedBytes}
	}
	return out
}

func workerOpsFromPB(ops map[string]*pb.WorkerOp) map[string]WorkerOp {
	if len(ops) == 0 {
		return nil
	}
	out := make(map[string]WorkerOp, len(ops))
	for k, o := range ops {
		out[k] = WorkerOp{Calls: int(o.GetCalls()), Seconds: o.GetSeconds(), PeakBytes: o.GetPeakBytes(), PeakAllocatedBytes: o.GetPeakAllocatedBytes()}
	}
	return out
}
