package cli

import (
	"bytes"
	"encoding/json"
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
	if line := lineWith(out, "kbp/l1/relu"); !strings.Contains(line, "done") || !strings.Contains(line, "yes") {
		t.Fatalf("relu should be done and correct:\n%s", out)
	}
	if srv.Requests() != 1 {
		t.Fatalf("%d requests, want 1", srv.Requests())
	}
	if body := srv.Body(0); body["model"] != "m" || body["temperature"] != 0.0 {
		t.Errorf("request %v", body)
	}
	if f := strings.Fields(lineWith(out, "openai ")); len(f) < 2 || f[1] != "oneshot" {
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

// One study, three named endpoints from kbplatform.yaml: one answers with a kernel, one without a
// code block, one lacks its key. Each bad reply is a classified failure recorded with its attempt
// and the study goes on; outcomes, fast_p and cost are per model, priced from the file.
func TestStudyOfSeveralNamedModels(t *testing.T) {
	kernel, err := os.ReadFile(filepath.Join("..", "..", "examples", "kernels", "relu", "cpp.py"))
	if err != nil {
		t.Fatal(err)
	}
	good := openaitest.New(t, func(_ int, _ map[string]any, w http.ResponseWriter) {
		openaitest.Completion(w, nil, "```python\n"+string(kernel)+"\n```")
	})
	prose := openaitest.New(t, func(_ int, _ map[string]any, w http.ResponseWriter) {
		openaitest.Completion(w, nil, "I would write a vectorised loop, but here is no code.")
	})
	env := isolated(t)
	env["KBP_TEST_KEY"] = cliTestKey
	cfgFile := filepath.Join(t.TempDir(), "kbplatform.yaml")
	yaml := fmt.Sprintf(`models:
  vllm:good:
    plugin: openai
    config: {base_url: %q, model: m, api_key_env: KBP_TEST_KEY}
    limits: {concurrency: 2, requests_per_minute: 600}
    price: {input: 1.0, output: 2.0}
  vllm:prose:
    plugin: openai
    config: {base_url: %q, model: m}
  openai:nokey:
    plugin: openai
    config: {base_url: %q, model: m-other, api_key_env: KBP_UNSET_KEY_FOR_TEST}
prices:
  m-served: {input: 0.5, output: 0.5}
`, good.BaseURL(), prose.BaseURL(), good.BaseURL())
	if err := os.WriteFile(cfgFile, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	env["KBP_CONFIG"] = cfgFile
	args := []string{"study", "run", "--model", "vllm:good", "--model", "vllm:prose", "--model", "openai:nokey", "--tasks", "kbp/l1/relu",
		"--device", "cpu", "--seeds", "1", "--timed-calls", "10", "--warmup", "1", "--check-calls", "2"}
	out, errOut, code := run(t, env, args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"vllm:good     kbp/l1/relu  done", "vllm:prose    kbp/l1/relu  done", "openai:nokey  kbp/l1/relu  done",
		"vllm:good: fast_0 1.00", "vllm:prose: fast_0 0.00", "openai:nokey: fast_0 0.00"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if good.Requests() != 1 || prose.Requests() != 1 {
		t.Errorf("requests: good %d, prose %d", good.Requests(), prose.Requests())
	}
	// 100 prompt and 20 completion tokens: at $1 and $2 per million (the named price wins over
	// the table's price for the served model name), and at $0.50 and $0.50.
	for model, want := range map[string]string{"vllm:good": "0.000140", "vllm:prose": "0.000060"} {
		found := false
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 2 && f[0] == model && f[1] == "oneshot" {
				found = f[len(f)-1] == want
			}
		}
		if !found {
			t.Errorf("cost of %s should be %s:\n%s", model, want, out)
		}
	}
	id := strings.TrimSuffix(strings.Fields(lineWith(out, "study "))[1], ":")
	shown, _, code := run(t, env, "study", "show", id, "--json")
	if code != 0 {
		t.Fatalf("show: %d", code)
	}
	var got struct {
		Calls []struct {
			Model   string `json:"model"`
			Attempt string `json:"attempt"`
			Failure string `json:"failure"`
			Tries   int    `json:"tries"`
		} `json:"calls"`
		Attempts []struct {
			Model   string   `json:"model"`
			Failure string   `json:"failure"`
			CallIDs []string `json:"call_ids"`
		} `json:"attempts"`
	}
	if err := json.Unmarshal([]byte(shown), &got); err != nil {
		t.Fatal(err)
	}
	failures := map[string]string{}
	for _, a := range got.Attempts {
		failures[a.Model] = a.Failure
		if len(a.CallIDs) != 1 {
			t.Errorf("attempt of %s links %d calls", a.Model, len(a.CallIDs))
		}
	}
	want := map[string]string{"vllm:good": "", "vllm:prose": "no_code", "openai:nokey": "missing_api_key"}
	if len(got.Calls) != 3 {
		t.Fatalf("%d calls recorded, want 3", len(got.Calls))
	}
	for _, c := range got.Calls {
		if c.Attempt == "" || c.Tries != 1 || (c.Model == "openai:nokey") != (c.Failure == "missing_api_key") {
			t.Errorf("call %+v", c)
		}
	}
	if fmt.Sprint(failures) != fmt.Sprint(want) {
		t.Errorf("failures %v, want %v", failures, want)
	}
}
