package plugins

import (
	"context"
	"slices"

	"github.com/kbplatform/kbplatform/sdk"
)

// The proxies implement the sdk interfaces on top of an Instance: every call (re)connects if the
// plugin is not running, and a crash or hang turns into a clear error for that call only.

// Model returns the instance as an sdk.Model.
func (i *Instance) Model() sdk.Model { return modelProxy{i} }

// Backend returns the instance as an sdk.Backend.
func (i *Instance) Backend() sdk.Backend { return backendProxy{i} }

// Strategy returns the instance as an sdk.Strategy.
func (i *Instance) Strategy() sdk.Strategy { return strategyProxy{i} }

// Target returns the instance as an sdk.Target.
func (i *Instance) Target() sdk.Target { return targetProxy{i} }

type base struct{ i *Instance }

func (b base) Info() sdk.Info { return b.i.Info() }

func (b base) Configure(ctx context.Context, c sdk.Configuration) error {
	grant := b.i.m.grants(b.i.spec, c.Raw)
	b.i.mu.Lock()
	b.i.config, b.i.platform = c.Raw, c.Platform
	// A process's environment is fixed when it starts: one that holds other secrets than the new
	// settings grant is replaced.
	restart := !slices.Equal(grant, b.i.grant)
	b.i.grant = grant
	b.i.mu.Unlock()
	if restart {
		b.i.Close()
	}
	r, err := b.i.conn(ctx)
	if err != nil {
		return err
	}
	return b.i.failed(ctx, "Configure", r.Configure(ctx, c.Raw, c.Platform))
}

type modelProxy struct{ i *Instance }

func (p modelProxy) Info() sdk.Info { return base{p.i}.Info() }
func (p modelProxy) Configure(ctx context.Context, c sdk.Configuration) error {
	return base{p.i}.Configure(ctx, c)
}

func (p modelProxy) Generate(ctx context.Context, req sdk.GenerateRequest) (*sdk.GenerateResponse, error) {
	r, err := p.i.conn(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := r.Model().Generate(ctx, req)
	return resp, p.i.failed(ctx, "Generate", err)
}

type backendProxy struct{ i *Instance }

func (p backendProxy) Info() sdk.Info { return base{p.i}.Info() }
func (p backendProxy) Configure(ctx context.Context, c sdk.Configuration) error {
	return base{p.i}.Configure(ctx, c)
}

func (p backendProxy) Prompt(ctx context.Context, req sdk.PromptRequest) ([]sdk.Message, error) {
	r, err := p.i.conn(ctx)
	if err != nil {
		return nil, err
	}
	out, err := r.Backend().Prompt(ctx, req)
	return out, p.i.failed(ctx, "Prompt", err)
}

func (p backendProxy) Extract(ctx context.Context, text string) (string, error) {
	r, err := p.i.conn(ctx)
	if err != nil {
		return "", err
	}
	out, err := r.Backend().Extract(ctx, text)
	return out, p.i.failed(ctx, "Extract", err)
}

func (p backendProxy) Check(ctx context.Context, source string, task sdk.Task) ([]sdk.Issue, error) {
	r, err := p.i.conn(ctx)
	if err != nil {
		return nil, err
	}
	out, err := r.Backend().Check(ctx, source, task)
	return out, p.i.failed(ctx, "Check", err)
}

func (p backendProxy) Recipe(ctx context.Context, hw *sdk.Hardware) (*sdk.BuildRecipe, error) {
	r, err := p.i.conn(ctx)
	if err != nil {
		return nil, err
	}
	out, err := r.Backend().Recipe(ctx, hw)
	return out, p.i.failed(ctx, "Recipe", err)
}

type strategyProxy struct{ i *Instance }

func (p strategyProxy) Info() sdk.Info { return base{p.i}.Info() }
func (p strategyProxy) Configure(ctx context.Context, c sdk.Configuration) error {
	return base{p.i}.Configure(ctx, c)
}

func (p strategyProxy) Run(ctx context.Context, req sdk.RunRequest, platform sdk.Platform) (*sdk.RunResult, error) {
	r, err := p.i.conn(ctx)
	if err != nil {
		return nil, err
	}
	out, err := r.Strategy().Run(ctx, req, platform)
	return out, p.i.failed(ctx, "Run", err)
}

type targetProxy struct{ i *Instance }

func (p targetProxy) Info() sdk.Info { return base{p.i}.Info() }
func (p targetProxy) Configure(ctx context.Context, c sdk.Configuration) error {
	return base{p.i}.Configure(ctx, c)
}

func (p targetProxy) Describe(ctx context.Context) (*sdk.Hardware, error) {
	r, err := p.i.conn(ctx)
	if err != nil {
		return nil, err
	}
	out, err := r.Target().Describe(ctx)
	return out, p.i.failed(ctx, "Describe", err)
}

func (p targetProxy) Compile(ctx context.Context, req sdk.CompileRequest) (*sdk.CompileResult, error) {
	r, err := p.i.conn(ctx)
	if err != nil {
		return nil, err
	}
	out, err := r.Target().Compile(ctx, req)
	return out, p.i.failed(ctx, "Compile", err)
}

func (p targetProxy) Evaluate(ctx context.Context, req sdk.EvaluateRequest, progress sdk.Progress) (*sdk.Result, error) {
	r, err := p.i.conn(ctx)
	if err != nil {
		return nil, err
	}
	out, err := r.Target().Evaluate(ctx, req, progress)
	return out, p.i.failed(ctx, "Evaluate", err)
}

func (p targetProxy) Baseline(ctx context.Context, req sdk.BaselineRequest, progress sdk.Progress) (*sdk.Result, error) {
	r, err := p.i.conn(ctx)
	if err != nil {
		return nil, err
	}
	out, err := r.Target().Baseline(ctx, req, progress)
	return out, p.i.failed(ctx, "Baseline", err)
}

func (p targetProxy) Validate(ctx context.Context, task sdk.Task, device string, cfg sdk.Config) (*sdk.Validation, error) {
	r, err := p.i.conn(ctx)
	if err != nil {
		return nil, err
	}
	out, err := r.Target().Validate(ctx, task, device, cfg)
	return out, p.i.failed(ctx, "Validate", err)
}
