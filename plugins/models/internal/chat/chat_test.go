package chat

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/kbplatform/kbplatform/sdk"
)

func TestRejected(t *testing.T) {
	sent := []string{"temperature", "top_p", "n", "max_tokens", "max_completion_tokens", "seed"}
	for _, tc := range []struct{ msg, want string }{
		{"Unsupported parameter: 'temperature' is not supported with this model.", "temperature"},
		{"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.", "max_completion_tokens"},
		{`Invalid JSON payload received. Unknown name "seed" at 'generation_config'`, "seed"},
		{"top_p: Extra inputs are not permitted", "top_p"},
		{"n: only 1 is supported", "n"},
		{"something went wrong in the engine", ""},
	} {
		t.Run(tc.want, func(t *testing.T) {
			if got := Rejected(tc.msg, sent); got != tc.want {
				t.Errorf("%q: got %q, want %q", tc.msg, got, tc.want)
			}
		})
	}
}

func TestMergeSettingsWin(t *testing.T) {
	one, half, seed := 1.0, 0.5, int64(9)
	c := Common{Temperature: &one, MaxTokens: 100}
	p := c.Merge(sdk.SamplingParams{Temperature: &half, TopP: &half, MaxTokens: 5, Seed: &seed, Stop: []string{"x"}})
	if *p.Temperature != 1 || *p.TopP != 0.5 || p.MaxTokens != 100 || *p.Seed != 9 || len(p.Stop) != 1 {
		t.Errorf("merged %+v", p)
	}
}

// Collect splits a request by n, asks again when a server returns fewer, and sums usage.
func TestCollect(t *testing.T) {
	ctx := context.Background()
	var asked []int
	send := func(_ context.Context, n int, _ map[string]bool) (*sdk.GenerateResponse, error) {
		asked = append(asked, n)
		got := min(n, 2) // a server that never returns more than two
		resp := &sdk.GenerateResponse{Usage: sdk.Usage{PromptTokens: 10, CompletionTokens: int64(got)}}
		for i := range got {
			resp.Completions = append(resp.Completions, sdk.Completion{Text: fmt.Sprint(i)})
		}
		return resp, nil
	}
	resp, err := Collect(ctx, 5, 4, &Dropper{}, send)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Completions) != 5 || fmt.Sprint(asked) != "[4 3 1]" || resp.Usage.PromptTokens != 30 || resp.Usage.CompletionTokens != 5 {
		t.Errorf("asked %v, got %d completions, usage %+v", asked, len(resp.Completions), resp.Usage)
	}
	empty := func(context.Context, int, map[string]bool) (*sdk.GenerateResponse, error) {
		return &sdk.GenerateResponse{}, nil
	}
	if _, err := Collect(ctx, 1, 0, &Dropper{}, empty); !errors.Is(err, sdk.ErrEmptyReply) {
		t.Errorf("a server that never answers: %v", err)
	}
}

func TestDropper(t *testing.T) {
	ctx := context.Background()
	reject := func(drop map[string]bool) (*sdk.GenerateResponse, error) {
		if !drop["temperature"] {
			return nil, fmt.Errorf("%w: HTTP 400: 'temperature' is not supported", sdk.ErrRejectedParameter)
		}
		return &sdk.GenerateResponse{}, nil
	}
	sent := func() []string { return []string{"temperature", "top_p"} }
	if _, err := (&Dropper{Sent: sent}).Do(ctx, reject); !errors.Is(err, sdk.ErrRejectedParameter) {
		t.Errorf("without drop_unsupported: %v", err)
	}
	d := &Dropper{Enabled: true, Sent: sent}
	if _, err := d.Do(ctx, reject); err != nil || !d.Dropped()["temperature"] || d.Dropped()["top_p"] {
		t.Errorf("with drop_unsupported: %v, dropped %v", err, d.Dropped())
	}
	// A rejection naming nothing that was sent is returned as it is, not retried forever.
	calls := 0
	vague := func(map[string]bool) (*sdk.GenerateResponse, error) {
		calls++
		return nil, fmt.Errorf("%w: HTTP 400: not supported", sdk.ErrRejectedParameter)
	}
	if _, err := d.Do(ctx, vague); !errors.Is(err, sdk.ErrRejectedParameter) || calls != 1 {
		t.Errorf("vague rejection: %v after %d calls", err, calls)
	}
}
