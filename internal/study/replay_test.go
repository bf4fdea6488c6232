package study

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kbplatform/kbplatform/internal/store"
	"github.com/kbplatform/kbplatform/plugins/models/replay"
	"github.com/kbplatform/kbplatform/sdk"
	"github.com/kbplatform/kbplatform/sdk/plugintest"
)

// putEval stores a kernel and its evaluation on a task, in a study.
func putEval(t *testing.T, st *store.Store, study, task, src, verdict string) {
	t.Helper()
	h := sha256.Sum256([]byte(src))
	hash := hex.EncodeToString(h[:])
	if err := st.PutKernel(store.KernelRecord{Hash: hash, Source: src, Name: src, FirstSeen: time.Now()}); err != nil {
		t.Fatal(err)
	}
	res := &sdk.Result{Contract: "test", Task: sdk.Task{ID: task, Size: "cpu"}, Kernel: sdk.Kernel{Hash: hash}, Verdict: verdict}
	if err := st.PutEvaluation(&store.Evaluation{Target: "local/cpu", Result: res, Study: study}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond) // ids order by time
}

// The replay model reads an earlier study's kernels through the host's Platform, across the real
// plugin boundary: only that study's, only those that passed when asked.
func TestReplayAnEarlierStudy(t *testing.T) {
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, id := range []string{"aaaa1111", "bbbb2222"} {
		if err := st.PutStudy(store.Study{ID: id, Spec: json.RawMessage(`{}`), CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	putEval(t, st, "aaaa1111", "kbp/l1/relu", "a-relu-pass", sdk.Pass)
	putEval(t, st, "aaaa1111", "kbp/l1/relu", "a-relu-fail", sdk.Fail)
	putEval(t, st, "aaaa1111", "kbp/l1/softmax", "a-softmax-pass", sdk.Pass)
	putEval(t, st, "bbbb2222", "kbp/l1/relu", "b-relu-pass", sdk.Pass)
	putEval(t, st, "", "kbp/l1/relu", "adhoc-relu-pass", sdk.Pass)

	host := &hostPlatform{store: st}
	ctx := context.Background()
	for _, tc := range []struct {
		name, cfg string
		want      []string
	}{
		{"one study, passed only", `{"source": "store", "study": "aaaa", "passed": true}`, []string{"a-relu-pass"}},
		{"one study", `{"source": "store", "study": "aaaa1111"}`, []string{"a-relu-fail", "a-relu-pass"}},
		{"every stored kernel", `{"source": "store"}`, []string{"adhoc-relu-pass", "b-relu-pass", "a-relu-fail", "a-relu-pass"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := plugintest.Connect(t, replay.New()).Model()
			if err := m.Configure(ctx, sdk.Configuration{Raw: json.RawMessage(tc.cfg), Platform: host}); err != nil {
				t.Fatal(err)
			}
			resp, err := m.Generate(ctx, sdk.GenerateRequest{N: len(tc.want), TaskID: "kbp/l1/relu"})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range resp.Completions {
				got = append(got, strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(c.Text, "```python\n"), "```\n")))
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	m := plugintest.Connect(t, replay.New()).Model()
	if err := m.Configure(ctx, sdk.Configuration{Raw: json.RawMessage(`{"source": "store", "study": "cccc"}`), Platform: host}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Generate(ctx, sdk.GenerateRequest{N: 1, TaskID: "kbp/l1/relu"}); !errors.Is(err, sdk.ErrNotFound) {
		t.Errorf("an unknown study: %v", err)
	}
}
