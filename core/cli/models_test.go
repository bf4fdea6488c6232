package cli

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/plugins/models/openai/openaitest"
)

const cliTestKey = "sk-cli-test-key-5c0ffee"

// A study against an OpenAI-compatible server: the reply's fenced ModelNew is extracted, built
// and judged; a repeated study (same requests, another spec) is served from the cache and sends
// nothing; --no-cache sends again; the key is in no file of the database and in no output.
func TestStudyAgainstOpenAICompatibleServer(t *testing.T) {
	kernel, err := os.ReadFile(filepath.Join("..", "..", "examples", "kernels", "relu", "cpp.py"))
	if err != nil {
		t.Fatal(err)
	}
	srv := openaitest.New(t, func(_ int, body map[string]any, w http.ResponseWriter) {
		openaitest.Completion(w, map[string]any{"reasoning_content": "a vectorised loop will do"},
			"Here is the kernel.\n\n```python\n"+string(kernel)+"\n```\n")
	})
	env := isolated(t)
	env["KBP_TEST_KEY"] = cliTestKey
	env["KBP_LOG_LEVEL"] = "debug"
	cfg := fmt.Sprintf(`{"base_url": %q, "model": "m", "api_key_env": "KBP_TEST_KEY"}`, srv.BaseURL())
	study := func(extra ...string) (string, string, int) {
		args := append([]string{"study", "run", "--model", "openai", "--model-config", cfg, "--backend", "cpp", "--strategy", "oneshot",
			"--tasks", "kbp/l1/relu", "--device", "cpu", "--timed-calls", "10", "--warmup", "1", "--check-calls", "2"}, extra...)
		return run(t, env, args...)
	}
	var logs bytes.Buffer
	out, errOut, code := study("--seeds", "1")
	logs.WriteString(out + errOut)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if line := lineWith(out, "kbp/l1/relu"); !strings.Contains(line, "done") || !strings.Contains(line, "true") {
		t.Fatalf("relu should be done and correct:\n%s", out)
	}
	if srv.Requests() != 1 {
		t.Fatalf("%d requests, want 1", srv.Requests())
	}
	if body := srv.Body(0); body["model"] != "m" || body["temperature"] != 0.0 {
		t.Errorf("request %v", body)
	}
	if !strings.Contains(lineWith(out, "openai"), "strategy/oneshot") {
		t.Errorf("no cost line for the model:\n%s", out)
	}

	// Another study asking the same question (two seeds instead of one): the cache answers.
	out, errOut, code = study("--seeds", "2")
	logs.WriteString(out + errOut)
	if code != 0 || srv.Requests() != 1 {
		t.Fatalf("repeated study: exit %d, %d new requests\n%s\n%s", code, srv.Requests()-1, out, errOut)
	}
	if line := lineWith(out, "openai"); !strings.Contains(line, "  1  ") {
		t.Errorf("the cost table should show one cached call: %q", line)
	}
	out, errOut, code = study("--seeds", "3", "--no-cache")
	logs.WriteString(out + errOut)
	if code != 0 || srv.Requests() != 2 {
		t.Fatalf("--no-cache: exit %d, %d requests\n%s\n%s", code, srv.Requests(), out, errOut)
	}

	out, errOut, code = run(t, env, "results", "cost", "--json")
	logs.WriteString(out + errOut)
	if code != 0 || strings.Count(out, `"model": "openai"`) != 3 {
		t.Errorf("results cost: %d\n%s", code, out)
	}
	shown, _, _ := run(t, env, "study", "list")
	logs.WriteString(shown)

	if strings.Contains(logs.String(), cliTestKey) {
		t.Errorf("the key is in the command's output")
	}
	err = filepath.Walk(env["KBP_DB"], func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if bytes.Contains(b, []byte(cliTestKey)) {
			t.Errorf("the key is in %s", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func lineWith(out, prefix string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}
