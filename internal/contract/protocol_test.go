package contract

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/kbplatform/kbplatform/internal/sandbox"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// opType is one op of the Go side: its request type and, through the request's reply method,
// its reply type.
type opType struct {
	name       string
	req, reply reflect.Type
}

func opOf[R any](req request[R]) opType {
	return opType{name: req.op(), req: reflect.TypeOf(req), reply: reflect.TypeFor[R]()}
}

// goOps is every op the driver's types describe.
var goOps = []opType{
	opOf(helloRequest{}), opOf(prepareRequest{}), opOf(loadRequest{}), opOf(trialRequest{}),
	opOf(profileRequest{}), opOf(timedRequest{}), opOf(dumpLastRequest{}), opOf(memoryRequest{}),
	opOf(guardRequest{}), opOf(compareRequest{}), opOf(sensitivityRequest{}), opOf(probeRequest{}), opOf(inputsRepeatRequest{}), opOf(ioBytesRequest{}), opOf(validateRequest{}), opOf(gcRequest{}),
	opOf(exitRequest{}),
}

// jsonFields lists a struct type's wire names, embedded structs' included, and which of them are
// always sent (no omitempty).
func jsonFields(t reflect.Type) (all, always []string) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if f.Anonymous && tag == "" {
			a, b := jsonFields(f.Type)
			all, always = append(all, a...), append(always, b...)
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		all = append(all, name)
		if !strings.Contains(opts, "omitempty") {
			always = append(always, name)
		}
	}
	return all, always
}

// workerTable is kbpworker/protocol.py's table, read by running it.
type workerTable struct {
	Envelope []string `json:"envelope"`
	Status   []string `json:"status"`
	Settings []string `json:"settings"`
	Ops      map[string]struct {
		Required []string `json:"required"`
		Optional []string `json:"optional"`
		Reply    []string `json:"reply"`
	} `json:"ops"`
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// The Go types and the worker's table describe the same ops with the same fields: a field added,
// dropped or renamed on one side alone fails here, not in an evaluation.
func TestProtocolMatchesWorker(t *testing.T) {
	cmd := exec.Command(testPython(t).Path, "-B", "-m", "kbpworker.protocol")
	cmd.Dir = "worker"
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reading the worker's protocol table: %v", err)
	}
	var py workerTable
	if err := json.Unmarshal(out, &py); err != nil {
		t.Fatalf("the worker's protocol table: %v\n%s", err, out)
	}
	if env, _ := jsonFields(reflect.TypeFor[envelope]()); !slices.Equal(sorted(env), sorted(py.Envelope)) {
		t.Errorf("envelope: Go %v, worker %v", env, py.Envelope)
	}
	status, _ := jsonFields(reflect.TypeFor[replyStatus]())
	if !slices.Equal(sorted(status), sorted(py.Status)) {
		t.Errorf("reply status: Go %v, worker %v", status, py.Status)
	}
	if s, _ := jsonFields(reflect.TypeFor[workerSettings]()); !slices.Equal(sorted(s), sorted(py.Settings)) {
		t.Errorf("hello settings: Go %v, worker %v", s, py.Settings)
	}
	var names []string
	for _, o := range goOps {
		names = append(names, o.name)
		w, ok := py.Ops[o.name]
		if !ok {
			t.Errorf("op %s: the worker does not serve it", o.name)
			continue
		}
		req, always := jsonFields(o.req)
		if want := append(slices.Clone(w.Required), w.Optional...); !slices.Equal(sorted(req), sorted(want)) {
			t.Errorf("op %s request: Go sends %v, the worker takes %v", o.name, req, want)
		}
		for _, f := range w.Required {
			if !slices.Contains(always, f) {
				t.Errorf("op %s: the worker requires %q, which Go may leave out", o.name, f)
			}
		}
		rep, _ := jsonFields(o.reply)
		rep = slices.DeleteFunc(rep, func(f string) bool { return slices.Contains(status, f) })
		if !slices.Equal(sorted(rep), sorted(w.Reply)) {
			t.Errorf("op %s reply: Go reads %v, the worker lists %v", o.name, rep, w.Reply)
		}
	}
	for op := range py.Ops {
		if !slices.Contains(names, op) {
			t.Errorf("op %s: the worker serves it, Go has no types for it", op)
		}
	}
}

// A command is one JSON object on one line, the envelope and the request's fields together, with
// the keys the driver sent before its requests were typed (a zero left out only where the
// worker's default is that zero).
func TestRequestsOnTheWire(t *testing.T) {
	build := false
	tol := &Tolerance{Atol: 0.5, Rtol: 0.25}
	cases := []struct {
		req  command
		want string
	}{
		{loadRequest{TaskPath: "t.py", KernelPath: "k.py", Build: &build},
			`{"op":"load","seq":7,"task_path":"t.py","kernel_path":"k.py","build":false}`},
		{loadRequest{TaskPath: "t.py", InitSeed: 5, Mode: "eager"},
			`{"op":"load","seq":7,"task_path":"t.py","init_seed":5,"mode":"eager"}`},
		{trialRequest{Seed: 1, Dist: "default", Dump: "/d/a"},
			`{"op":"trial","seq":7,"seed":1,"dist":"default","dump":"/d/a"}`},
		{timedRequest{Dist: "default", Noop: true},
			`{"op":"timed","seq":7,"seed":0,"dist":"default","noop":true}`},
		{compareRequest{Seed: 2, Dist: "scaled", Output: json.RawMessage(`{"sig":"T","leaves":[]}`), Strides: "any", Tolerance: tol, Digest: true},
			`{"op":"compare","seq":7,"seed":2,"dist":"scaled","output":{"sig":"T","leaves":[]},"strides":"any","tolerance":{"atol":0.5,"rtol":0.25},"digest":true}`},
		{memoryRequest{}, `{"op":"memory","seq":7}`},
		{helloRequest{Settings: workerSettings{Device: "cpu", Poison: true, ExtCache: "/c", CPUThreads: 2}},
			`{"op":"hello","seq":7,"settings":{"device":"cpu","poison":true,"flush_cache":false,"ext_cache":"/c","cpu_threads":2}}`},
	}
	for _, c := range cases {
		line, err := frame(c.req, 7)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(string(line), "\n") || strings.Count(string(line), "\n") != 1 {
			t.Errorf("%s: not one line: %q", c.req.op(), line)
		}
		var got, want map[string]any
		if err := json.Unmarshal(line, &got); err != nil {
			t.Fatalf("%s: %v: %s", c.req.op(), err, line)
		}
		_ = json.Unmarshal([]byte(c.want), &want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", c.req.op(), line, c.want)
		}
	}
}

// fakeWorker is a worker that answers every command with a scripted reply for its op (the
// command's seq added), and exit with ok.
const fakeWorker = `
import json, os
replies = json.loads(os.environ["KBP_FAKE_REPLIES"])
res = int(os.environ["KBP_RES_FD"])
for line in os.fdopen(int(os.environ["KBP_CMD_FD"]), "rb"):
    cmd = json.loads(line)
    reply = dict(replies.get(cmd["op"], {"ok": True}))
    reply["seq"] = cmd["seq"]
    os.write(res, (json.dumps(reply) + "\n").encode())
    if cmd["op"] == "exit":
        break
`

func startFake(t *testing.T, replies map[string]any) *proc {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "fake.py")
	if err := os.WriteFile(script, []byte(fakeWorker), 0o600); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(replies)
	py := testPython(t)
	policy := sandbox.Policy{Env: []string{"KBP_FAKE_REPLIES=" + string(b)}, ReadOnly: append(append([]string(nil), sandbox.SystemPaths...), py.Paths...), ReadWrite: []string{dir}}
	p, err := spawn(spawnSpec{Python: py.Path, Script: script, Role: "candidate", Dir: dir, Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.close)
	return p
}

func fakeRun(t *testing.T, p *proc) *evalRun {
	cfg := Defaults()
	cfg.CallTimeout = 20 * time.Second
	return &evalRun{e: &Evaluator{opt: Options{Config: cfg}}, ctx: context.Background(), res: &Result{},
		cand: p, dumpDir: t.TempDir(), phases: &Phases{}}
}

// A candidate's reply whose fields do not fit their types is tampering, as a malformed line is:
// the process is killed, and no field reads as its zero value (no tampering found, no input
// changed, no late writes), which could let a failing kernel pass.
func TestMalformedTypedReplyIsTampering(t *testing.T) {
	manifest := map[string]any{"sig": "T", "leaves": []any{}}
	trial := func(r *evalRun) bool {
		_, ok := r.trialCall(&Trial{Seed: 1, Dist: "default"}, "t1r0", false, false)
		return ok
	}
	cases := []struct {
		op, name string
		reply    map[string]any
		run      func(r *evalRun) bool // false: the evaluation has its verdict
	}{
		{"trial", "mutated is not a list", map[string]any{"ok": true, "output": manifest, "mutated": "all", "call_ms": 1}, trial},
		{"trial", "tampered is not a list", map[string]any{"ok": true, "output": manifest, "mutated": []int{}, "tampered": map[string]any{"torch.allclose": "replaced"}}, trial},
		{"trial", "an error reply whose tampered is not a list", map[string]any{"ok": false, "error": map[string]any{"class": "runtime_error", "message": "boom"}, "tampered": "torch.allclose replaced"}, trial},
		{"dump_last", "late_writes is not a bool", map[string]any{"ok": true, "output": manifest, "inputs": manifest, "late_writes": "yes"},
			func(r *evalRun) bool { ok, _ := r.recheck(0, 1); return ok }},
		{"timed", "device_ms is not a number", map[string]any{"ok": true, "device_ms": "nan", "host_ms": 1},
			func(r *evalRun) bool {
				_, err := r.series(r.cand, 1, nil, false)
				r.candFail("timing", err)
				return err == nil
			}},
	}
	for _, c := range cases {
		t.Run(c.op+": "+c.name, func(t *testing.T) {
			p := startFake(t, map[string]any{c.op: c.reply})
			r := fakeRun(t, p)
			if c.run(r) {
				t.Fatal("the evaluation went on past a malformed reply")
			}
			if r.res.Verdict != Fail || r.res.ErrorClass != ClassTampering {
				t.Fatalf("got %s/%s: %s", r.res.Verdict, r.res.ErrorClass, r.res.Message)
			}
			if !strings.Contains(r.res.Message, "malformed") || !strings.Contains(r.res.Message, c.op) {
				t.Errorf("the message does not say which reply was malformed: %s", r.res.Message)
			}
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				t.Error("the process that wrote it is still running")
			}
		})
	}
}

// What a malformed line or an unreadable error object gave before typed replies, it still gives;
// a well-formed reply decodes into its fields.
func TestRepliesDecode(t *testing.T) {
	p := startFake(t, map[string]any{
		"trial":  map[string]any{"ok": true, "output": map[string]any{"sig": "T", "leaves": []any{}}, "mutated": []int{0}, "call_ms": 2.5, "tampered": []string{}},
		"guard":  map[string]any{"ok": true, "tampered": []string{"time.perf_counter replaced"}},
		"memory": map[string]any{"ok": false, "error": "not an object"},
	})
	rep, err := call(context.Background(), p, 20*time.Second, trialRequest{Seed: 1, Dist: "default", Dump: "/d"})
	if err != nil || !slices.Equal(rep.Mutated, []int{0}) || rep.CallMS != 2.5 || rep.Seq != p.seq {
		t.Fatalf("trial: %+v, %v", rep, err)
	}
	var out map[string]any
	if err := json.Unmarshal(rep.Output, &out); err != nil || out["sig"] != "T" {
		t.Fatalf("trial output: %s, %v", rep.Output, err)
	}
	g, err := call(context.Background(), p, 20*time.Second, guardRequest{})
	if err != nil || !slices.Equal(g.Tampered, []string{"time.perf_counter replaced"}) {
		t.Fatalf("guard: %+v, %v", g, err)
	}
	_, err = call(context.Background(), p, 20*time.Second, memoryRequest{})
	var we *workerError
	if !errors.As(err, &we) || we.Class != ClassHarness || we.Message != "unreadable error reply" {
		t.Fatalf("an unreadable error object: %v", err)
	}
	if p.exited() {
		t.Fatal("an unreadable error object killed the worker")
	}
}

// No candidate code has run when hello answers: a hello reply that does not decode is the
// harness's failure, as a hello without a fingerprint is.
func TestMalformedHelloIsHarnessError(t *testing.T) {
	e := &Evaluator{opt: Options{Config: Defaults()}}
	for _, reply := range []map[string]any{
		{"ok": true, "fingerprint": "cpu"},
		{"ok": true, "ipc": "yes", "fingerprint": map[string]any{"torch": "1.13"}},
		{"ok": true},
	} {
		p := startFake(t, map[string]any{"hello": reply})
		_, err := e.hello(context.Background(), p, workerSettings{Device: "cpu"})
		if cls := classOf(err); cls != ClassHarness {
			t.Errorf("hello %v: class %q (%v)", reply, cls, err)
		}
	}
}

// TestAccountedOpsAreOps holds the record's list of accounted operations to the protocol, and
// checks that a worker's account is filtered to them.
func TestAccountedOpsAreOps(t *testing.T) {
	names := map[string]bool{}
	for _, o := range goOps {
		names[o.name] = true
	}
	for _, k := range accountedOps {
		if !names[k] {
			t.Errorf("accounted op %q is not an op of the protocol", k)
		}
	}
	// The other way round: an op the worker accounts for (all but its UNACCOUNTED, in
	// kbpworker/__main__.py) reaches the record.
	for name := range names {
		if !slices.Contains([]string{"hello", "memory", "exit", "gc"}, name) && !slices.Contains(accountedOps, name) {
			t.Errorf("op %q is accounted for by the worker but left out of the record's accountedOps", name)
		}
	}
	got := phaseOps(map[string]workerOp{
		"trial": {Calls: 3, Seconds: 0.5, Peak: 10, Allocated: 4}, "evil": {Calls: 1}, "timed": {Calls: -1},
		"compare": {Calls: 1, Seconds: math.Inf(1)},
	})
	if len(got) != 1 || got["trial"] != (WorkerOp{Calls: 3, Seconds: 0.5, PeakBytes: 10, PeakAllocatedBytes: 4}) {
		t.Errorf("phaseOps kept %+v, want only the trial", got)
	}
}
