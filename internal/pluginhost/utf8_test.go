package pluginhost

import (
	"context"
	"net"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/kbplatform/kbplatform/proto/kbplatform/plugin/v1"
	"github.com/kbplatform/kbplatform/sdk"
)

// noisyTarget returns a result whose strings hold bytes a candidate may print: invalid UTF-8
// everywhere a string can sit (fields, repeated fields, struct values and keys, nested messages).
type noisyTarget struct {
	sdk.NoConfig
	bad string
}

func (n *noisyTarget) Info() sdk.Info {
	return sdk.Info{Kind: sdk.KindTarget, Name: "noisy", Version: "1"}
}
func (n *noisyTarget) Describe(context.Context) (*sdk.Hardware, error) {
	return &sdk.Hardware{Target: n.bad, Fingerprint: sdk.Fingerprint{"cpu" + n.bad: n.bad}}, nil
}
func (n *noisyTarget) Compile(context.Context, sdk.CompileRequest) (*sdk.CompileResult, error) {
	return &sdk.CompileResult{Log: n.bad}, nil
}
func (n *noisyTarget) Evaluate(_ context.Context, req sdk.EvaluateRequest, progress sdk.Progress) (*sdk.Result, error) {
	progress("compiling " + n.bad)
	return &sdk.Result{Verdict: sdk.Pass, Log: n.bad, Warnings: []string{n.bad}, Kernel: req.Kernel,
		Mismatch: &sdk.Mismatch{Message: n.bad, Detail: map[string]any{"k": n.bad}}}, nil
}
func (n *noisyTarget) Baseline(context.Context, sdk.BaselineRequest, sdk.Progress) (*sdk.Result, error) {
	return &sdk.Result{Verdict: sdk.Pass, Log: n.bad}, nil
}
func (n *noisyTarget) Validate(context.Context, sdk.Task, string, sdk.Config) (*sdk.Validation, error) {
	return &sdk.Validation{Errors: []string{n.bad}}, nil
}

// serveTarget serves impl with the SDK on a real gRPC server and returns the host's client for it.
func serveTarget(t *testing.T, impl sdk.Plugin, sopts []grpc.ServerOption, dopts []grpc.DialOption) sdk.Target {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(sopts...)
	if err := (&sdk.GRPCPlugin{Impl: impl}).GRPCServer(nil, s); err != nil {
		t.Fatal(err)
	}
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), append(dopts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &targetClient{r: &Remote{}, c: pb.NewTargetClient(conn)}
}

func TestInvalidUTF8CrossesTheBoundary(t *testing.T) {
	// A log cut in the middle of "é" (0xc3 0xa9) and raw bytes a candidate printed.
	bad := "ok \xc3 then \xff\xfe binary"
	impl := &noisyTarget{bad: bad}
	t.Run("without the options the verdict is lost", func(t *testing.T) {
		c := serveTarget(t, impl, nil, nil)
		if _, err := c.Evaluate(context.Background(), sdk.EvaluateRequest{}, func(string) {}); err == nil || !strings.Contains(err.Error(), "UTF-8") {
			t.Fatalf("got %v, want the marshaling error this guards against", err)
		}
	})
	c := serveTarget(t, impl, sdk.ServerOptions(), sdk.DialOptions())
	want := "ok \uFFFD then \uFFFD binary"
	tests := []struct {
		name string
		call func() ([]string, error)
	}{
		{"evaluate", func() ([]string, error) {
			var progress []string
			r, err := c.Evaluate(context.Background(), sdk.EvaluateRequest{Kernel: sdk.Kernel{Name: "k" + bad}}, func(m string) { progress = append(progress, m) })
			if err != nil {
				return nil, err
			}
			return append(progress, r.Log, r.Warnings[0], r.Mismatch.Message, r.Mismatch.Detail["k"].(string), r.Kernel.Name), nil
		}},
		{"baseline", func() ([]string, error) {
			r, err := c.Baseline(context.Background(), sdk.BaselineRequest{}, nil)
			if err != nil {
				return nil, err
			}
			return []string{r.Log}, nil
		}},
		{"describe", func() ([]string, error) {
			h, err := c.Describe(context.Background())
			if err != nil {
				return nil, err
			}
			var s []string
			for k, v := range h.Fingerprint {
				s = append(s, k, v.(string))
			}
			return append(s, h.Target), nil
		}},
		{"compile", func() ([]string, error) {
			r, err := c.Compile(context.Background(), sdk.CompileRequest{})
			if err != nil {
				return nil, err
			}
			return []string{r.Log}, nil
		}},
		{"validate", func() ([]string, error) {
			r, err := c.Validate(context.Background(), sdk.Task{}, "cpu", sdk.DefaultConfig())
			if err != nil {
				return nil, err
			}
			return r.Errors, nil
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.call()
			if err != nil {
				t.Fatalf("the reply did not arrive: %v", err)
			}
			for _, s := range got {
				if !utf8.ValidString(s) {
					t.Errorf("%q is not valid UTF-8", s)
				}
				if strings.HasPrefix(s, "ok") && s != want {
					t.Errorf("got %q, want %q", s, want)
				}
			}
		})
	}
}
