package sdk

import (
	"context"
	"net"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/kbplatform/kbplatform/proto/kbplatform/plugin/v1"
)

// noisyTarget returns a result whose strings hold bytes a candidate may print: invalid UTF-8
// everywhere a string can sit (fields, repeated fields, struct values and keys, nested messages).
type noisyTarget struct {
	NoConfig
	bad string
}

func (n *noisyTarget) Info() Info { return Info{Kind: KindTarget, Name: "noisy", Version: "1"} }
func (n *noisyTarget) Describe(context.Context) (*Hardware, error) {
	return &Hardware{Target: n.bad, Fingerprint: Fingerprint{"cpu" + n.bad: n.bad}}, nil
}
func (n *noisyTarget) Compile(context.Context, CompileRequest) (*CompileResult, error) {
	return &CompileResult{Log: n.bad}, nil
}
func (n *noisyTarget) Evaluate(_ context.Context, req EvaluateRequest, progress Progress) (*Result, error) {
	progress("compiling " + n.bad)
	return &Result{Verdict: Pass, Log: n.bad, Warnings: []string{n.bad}, Kernel: req.Kernel,
		Mismatch: &Mismatch{Message: n.bad, Detail: map[string]any{"k": n.bad}}}, nil
}
func (n *noisyTarget) Baseline(context.Context, BaselineRequest, Progress) (*Result, error) {
	return &Result{Verdict: Pass, Log: n.bad}, nil
}
func (n *noisyTarget) Validate(context.Context, Task, string, Config) (*Validation, error) {
	return &Validation{Errors: []string{n.bad}}, nil
}

// serveTarget serves impl on a real gRPC server and returns a client for it.
func serveTarget(t *testing.T, impl Target, sopts []grpc.ServerOption, dopts []grpc.DialOption) Target {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(sopts...)
	pb.RegisterTargetServer(s, &targetServer{impl: impl})
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
		if _, err := c.Evaluate(context.Background(), EvaluateRequest{}, func(string) {}); err == nil || !strings.Contains(err.Error(), "UTF-8") {
			t.Fatalf("got %v, want the marshaling error this guards against", err)
		}
	})
	c := serveTarget(t, impl, ServerOptions(), DialOptions())
	want := "ok \uFFFD then \uFFFD binary"
	tests := []struct {
		name string
		call func() ([]string, error)
	}{
		{"evaluate", func() ([]string, error) {
			var progress []string
			r, err := c.Evaluate(context.Background(), EvaluateRequest{Kernel: Kernel{Name: "k" + bad}}, func(m string) { progress = append(progress, m) })
			if err != nil {
				return nil, err
			}
			return append(progress, r.Log, r.Warnings[0], r.Mismatch.Message, r.Mismatch.Detail["k"].(string), r.Kernel.Name), nil
		}},
		{"baseline", func() ([]string, error) {
			r, err := c.Baseline(context.Background(), BaselineRequest{}, nil)
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
			r, err := c.Compile(context.Background(), CompileRequest{})
			if err != nil {
				return nil, err
			}
			return []string{r.Log}, nil
		}},
		{"validate", func() ([]string, error) {
			r, err := c.Validate(context.Background(), Task{}, "cpu", DefaultConfig())
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

func TestValidMessageReachesEveryString(t *testing.T) {
	bad := "\xff"
	st, _ := structpb.NewStruct(map[string]any{"a": []any{"x"}})
	st.Fields["a"].GetListValue().Values[0] = structpb.NewStringValue(bad)
	st.Fields[bad] = structpb.NewStringValue("v")
	m := &pb.Result{Log: bad, Warnings: []string{"fine", bad}, Task: &pb.Task{Name: bad}, Fingerprint: st,
		Trials: []*pb.Trial{{Message: bad}}, Compile: &pb.CompileResult{Traceback: bad}}
	validMessage(m)
	var check func(v any)
	check = func(v any) {
		switch x := v.(type) {
		case string:
			if !utf8.ValidString(x) {
				t.Errorf("left invalid: %q", x)
			}
		case []any:
			for _, e := range x {
				check(e)
			}
		case map[string]any:
			for k, e := range x {
				check(k)
				check(e)
			}
		}
	}
	for _, s := range []string{m.Log, m.Warnings[0], m.Warnings[1], m.Task.Name, m.Trials[0].Message, m.Compile.Traceback} {
		check(s)
	}
	check(m.Fingerprint.AsMap())
	if m.Warnings[0] != "fine" {
		t.Errorf("a valid string changed: %q", m.Warnings[0])
	}
}
