package plugins

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/kbplatform/kbplatform/sdk"
)

// The test binary doubles as the plugins these tests start: KBP_TEST_PLUGIN names which.
func TestMain(m *testing.M) {
	switch os.Getenv("KBP_TEST_PLUGIN") {
	case "":
		os.Exit(m.Run())
	case "crasher":
		sdk.Serve(&testModel{name: "crasher"})
	case "old-protocol":
		cfg := sdk.ServeConfig(&testModel{name: "old-protocol"})
		cfg.HandshakeConfig.ProtocolVersion = sdk.Protocol + 1
		plugin.Serve(cfg)
	case "spawner":
		sdk.Serve(&spawner{})
	case "echo-target":
		sdk.Serve(&echoTarget{})
	case "env-model":
		sdk.Serve(envModel{})
	}
	os.Exit(0)
}

// testModel crashes on "crash", hangs on "hang", answers otherwise.
type testModel struct {
	sdk.NoConfig
	name string
}

func (m *testModel) Info() sdk.Info {
	return sdk.Info{Kind: sdk.KindModel, Name: m.name, Version: "1.0.0"}
}

func (m *testModel) Generate(ctx context.Context, req sdk.GenerateRequest) (*sdk.GenerateResponse, error) {
	switch req.Messages[0].Content {
	case "crash":
		os.Exit(3)
	case "hang":
		select {}
	case "budget":
		return nil, fmt.Errorf("over: %w", sdk.ErrBudgetExhausted)
	}
	return &sdk.GenerateResponse{Completions: []sdk.Completion{{Text: "pid " + strconv.Itoa(os.Getpid())}}}, nil
}

// spawner is a target whose Describe starts a long-lived child in its own process group (as the
// contract's workers are) and reports its pid.
type spawner struct{ sdk.NoConfig }

func (s *spawner) Info() sdk.Info {
	return sdk.Info{Kind: sdk.KindTarget, Name: "spawner", Version: "1.0.0"}
}
func (s *spawner) Describe(context.Context) (*sdk.Hardware, error) {
	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &sdk.Hardware{Target: "spawner", Capabilities: []string{"child:" + strconv.Itoa(cmd.Process.Pid)}}, nil
}
func (s *spawner) Compile(context.Context, sdk.CompileRequest) (*sdk.CompileResult, error) {
	return nil, sdk.ErrUnsupported
}
func (s *spawner) Evaluate(context.Context, sdk.EvaluateRequest, sdk.Progress) (*sdk.Result, error) {
	return nil, sdk.ErrUnsupported
}
func (s *spawner) Baseline(context.Context, sdk.BaselineRequest, sdk.Progress) (*sdk.Result, error) {
	return nil, sdk.ErrUnsupported
}
func (s *spawner) Validate(context.Context, sdk.Task, string, sdk.Config) (*sdk.Validation, error) {
	return nil, sdk.ErrUnsupported
}

// install writes a plugin binary kbplugin-<kind>-<file> into dir that runs this test binary as
// the test plugin named plugin.
func install(t testing.TB, dir, kind, file, plugin string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, BinaryPrefix+kind+"-"+file)
	script := fmt.Sprintf("#!/bin/sh\nKBP_TEST_PLUGIN=%s exec %q -test.run=^$ \"$@\"\n", plugin, exe)
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func manager(t *testing.T, dirs ...string) *Manager {
	m := New(Options{Dirs: dirs, LockFile: filepath.Join(t.TempDir(), "plugins.lock"),
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Error, Output: os.Stderr})})
	t.Cleanup(m.Close)
	return m
}

func gen(ctx context.Context, m sdk.Model, content string) (*sdk.GenerateResponse, error) {
	return m.Generate(ctx, sdk.GenerateRequest{N: 1, Messages: []sdk.Message{{Role: "user", Content: content}}})
}

func TestUnlockedBinaryIsRefusedUntilLocked(t *testing.T) {
	dir := t.TempDir()
	install(t, dir, "model", "crasher", "crasher")
	m := manager(t, dir)
	if _, err := m.Start(context.Background(), "model/crasher", nil, nil); !errors.Is(err, ErrNotLocked) {
		t.Fatalf("unlocked: got %v, want ErrNotLocked", err)
	}
	lock, problems, err := m.LockAll(context.Background())
	if err != nil || len(problems) != 0 || len(lock.Plugins) != 1 || lock.Plugins[0].Name != "crasher" || lock.Plugins[0].Version != "1.0.0" {
		t.Fatalf("lock: %v %v %+v", err, problems, lock)
	}
	inst, err := m.Start(context.Background(), "model/crasher", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gen(context.Background(), inst.Model(), "hello"); err != nil {
		t.Fatal(err)
	}
}

func TestIdentityComesFromTheplugin(t *testing.T) {
	dir := t.TempDir()
	// The file says "other"; the plugin says "crasher": it is locked and found as model/crasher.
	install(t, dir, "model", "other", "crasher")
	m := manager(t, dir)
	lock, _, err := m.LockAll(context.Background())
	if err != nil || len(lock.Plugins) != 1 || lock.Plugins[0].Name != "crasher" {
		t.Fatalf("lock: %v %+v", err, lock)
	}
	if _, err := m.Start(context.Background(), "model/crasher", nil, nil); err != nil {
		t.Fatalf("start by reported identity: %v", err)
	}
	if _, err := m.Start(context.Background(), "model/other", nil, nil); err == nil {
		t.Fatal("the file name must not be an identity")
	}
}

func TestChecksumMismatch(t *testing.T) {
	dir := t.TempDir()
	p := install(t, dir, "model", "crasher", "crasher")
	m := manager(t, dir)
	if _, _, err := m.LockAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p, append(b, []byte("# changed\n")...), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := m.Start(context.Background(), "model/crasher", nil, nil)
	if !errors.Is(err, ErrChecksumMismatch) || !strings.Contains(err.Error(), "plugins lock") {
		t.Fatalf("got %v, want ErrChecksumMismatch telling how to accept it", err)
	}
}

func TestProtocolMismatch(t *testing.T) {
	dir := t.TempDir()
	install(t, dir, "model", "old-protocol", "old-protocol")
	m := manager(t, dir)
	lock, problems, _ := m.LockAll(context.Background())
	if len(lock.Plugins) != 0 || len(problems) != 1 {
		t.Fatalf("a plugin of another protocol must not lock: %+v %v", lock, problems)
	}
	for _, why := range problems {
		if !strings.Contains(why, "protocol") {
			t.Errorf("reason %q does not mention the protocol", why)
		}
	}
}

func TestCrashIsAnErrorForThatCallOnly(t *testing.T) {
	dir := t.TempDir()
	install(t, dir, "model", "crasher", "crasher")
	m := manager(t, dir)
	m.LockAll(context.Background())
	inst, err := m.Start(context.Background(), "model/crasher", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	model := inst.Model()
	first, err := gen(context.Background(), model, "hello")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gen(context.Background(), model, "crash"); !errors.Is(err, ErrCrashed) {
		t.Fatalf("crash: got %v, want ErrCrashed", err)
	}
	again, err := gen(context.Background(), model, "hello")
	if err != nil {
		t.Fatalf("after the crash: %v", err)
	}
	if again.Completions[0].Text == first.Completions[0].Text || inst.Starts() != 2 {
		t.Errorf("expected a restarted process: %q then %q, %d starts", first.Completions[0].Text, again.Completions[0].Text, inst.Starts())
	}
	// Sentinels survive the real process boundary too.
	if _, err := gen(context.Background(), model, "budget"); !errors.Is(err, sdk.ErrBudgetExhausted) {
		t.Errorf("sentinel: %v", err)
	}
}

func TestHangIsKilledAndRestarted(t *testing.T) {
	dir := t.TempDir()
	install(t, dir, "model", "crasher", "crasher")
	m := manager(t, dir)
	m.LockAll(context.Background())
	inst, err := m.Start(context.Background(), "model/crasher", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	pid := inst.Pid()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := gen(ctx, inst.Model(), "hang"); !errors.Is(err, ErrHung) {
		t.Fatalf("hang: got %v, want ErrHung", err)
	}
	if alive(pid) {
		t.Errorf("hung plugin %d still running", pid)
	}
	if _, err := gen(context.Background(), inst.Model(), "hello"); err != nil {
		t.Fatalf("after the hang: %v", err)
	}
}

// alive reports whether pid runs (a zombie does not count).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || !strings.HasPrefix(strings.TrimSpace(s[i+1:]), "Z")
}

func TestChildrenDieWithThePlugin(t *testing.T) {
	dir := t.TempDir()
	install(t, dir, "target", "spawner", "spawner")
	m := manager(t, dir)
	m.LockAll(context.Background())
	for _, how := range []string{"close", "kill"} {
		t.Run(how, func(t *testing.T) {
			inst, err := m.Start(context.Background(), "target/spawner", nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			hw, err := inst.Target().Describe(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			child, _ := strconv.Atoi(strings.TrimPrefix(hw.Capabilities[0], "child:"))
			if !alive(child) {
				t.Fatal("child not running")
			}
			if how == "close" {
				inst.Close()
			} else {
				inst.Kill()
			}
			deadline := time.Now().Add(5 * time.Second)
			for alive(child) && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if alive(child) {
				syscall.Kill(child, syscall.SIGKILL)
				t.Fatalf("child %d of the plugin survived %s", child, how)
			}
		})
	}
}
