package sdk

import (
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/kbplatform/kbplatform/proto/kbplatform/plugin/v1"
)

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
