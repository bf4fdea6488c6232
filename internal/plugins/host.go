// Package plugins is the host side of kbplatform's plugins: discovery on the plugin path, the
// lock file that pins third-party binaries, starting (and restarting) plugin processes, and
// killing them together with everything they started.
//
// Three sources, in order of precedence for the same kind/name:
//   - third-party binaries kbplugin-<kind>-<name> on the plugin path, used only once locked;
//   - bundled binaries of the same naming next to the kbplatform executable (same installation);
//   - built-ins compiled into kbplatform, run as `kbplatform plugin serve <kind>/<name>`.
//
// Every plugin runs out of process; identity comes from the plugin's Base.Info, not file names.
package plugins

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/kbplatform/kbplatform/internal/pluginhost"
	"github.com/kbplatform/kbplatform/sdk"
)

// Errors of the host.
var (
	ErrUnknown          = errors.New("no such plugin")
	ErrNotLocked        = errors.New("plugin binary is not locked")
	ErrChecksumMismatch = errors.New("plugin binary does not match its lock")
	ErrIdentity         = errors.New("plugin identity does not match")
	ErrCrashed          = errors.New("plugin crashed")
	ErrHung             = errors.New("plugin stopped answering")
	ErrStart            = errors.New("plugin failed to start")
)

// Source says where a plugin comes from.
type Source string

// Sources.
const (
	SourceThirdParty Source = "third-party"
	SourceBundled    Source = "bundled"
	SourceBuiltin    Source = "built-in"
)

// BinaryPrefix starts the file name of every plugin binary.
const BinaryPrefix = "kbplugin-"

// Options configure a Manager.
type Options struct {
	Exe      string       // the running kbplatform binary: serves built-ins, and bundled plugins sit beside it
	Dirs     []string     // the third-party plugin path, in order
	LockFile string       // where third-party binaries are pinned
	Builtins []string     // "kind/name" of the plugins compiled into Exe
	Logger   hclog.Logger // plugin logs are re-logged here
	Stderr   io.Writer    // plugin stderr that is not a log line (default: discarded)
	Env      []string     // extra environment for every plugin process, passed as given
	// Secrets name environment variables that no plugin process receives unless granted, besides
	// every variable secret.IsName recognises (API keys, tokens, passwords, the providers'
	// variables): the api_key_env of a study's models, say, whatever their names.
	Secrets []string
	// Grant names the secret variables one plugin instance receives, given its spec and
	// settings: the key variable a built-in provider reads by default, the cluster target's
	// password. Whatever Grant says, a model instance receives the variable its settings'
	// api_key_env names; with Grant nil, that is the only secret any process receives.
	Grant func(spec Spec, config json.RawMessage) []string
}

// Manager starts plugins.
type Manager struct {
	opt       Options
	mu        sync.Mutex
	instances []*Instance
}

// New returns a Manager.
func New(opt Options) *Manager {
	if opt.Logger == nil {
		opt.Logger = hclog.New(&hclog.LoggerOptions{Name: "plugin", Level: hclog.Warn, Output: os.Stderr})
	}
	return &Manager{opt: opt}
}

// Spec says how to run one plugin.
type Spec struct {
	Kind    string   `json:"kind"`
	Name    string   `json:"name"`
	Source  Source   `json:"source"`
	Path    string   `json:"path"`
	Args    []string `json:"args,omitempty"`
	SHA256  string   `json:"sha256,omitempty"` // pinned hash (third-party)
	Version string   `json:"version,omitempty"`
}

// Ref is "kind/name".
func (s Spec) Ref() string { return s.Kind + "/" + s.Name }

func splitRef(ref string) (kind, name string, err error) {
	kind, name, ok := strings.Cut(ref, "/")
	if !ok || name == "" || !validKind(kind) {
		return "", "", fmt.Errorf("%w: %q (want kind/name, kind one of %s)", ErrUnknown, ref, strings.Join(sdk.Kinds, ", "))
	}
	return kind, name, nil
}

func validKind(k string) bool {
	for _, x := range sdk.Kinds {
		if x == k {
			return true
		}
	}
	return false
}

// Resolve picks the plugin to run for kind/name.
func (m *Manager) Resolve(kind, name string) (Spec, error) {
	lock, err := ReadLock(m.opt.LockFile)
	if err != nil {
		return Spec{}, err
	}
	for _, e := range lock.Plugins {
		if e.Kind == kind && e.Name == name {
			return Spec{Kind: kind, Name: name, Source: SourceThirdParty, Path: e.Path, SHA256: e.SHA256, Version: e.Version}, nil
		}
	}
	if m.opt.Exe != "" {
		p := filepath.Join(filepath.Dir(m.opt.Exe), BinaryPrefix+kind+"-"+name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return Spec{Kind: kind, Name: name, Source: SourceBundled, Path: p}, nil
		}
	}
	for _, b := range m.opt.Builtins {
		if b == kind+"/"+name {
			return Spec{Kind: kind, Name: name, Source: SourceBuiltin, Path: m.opt.Exe, Args: []string{"plugin", "serve", b}}, nil
		}
	}
	for _, c := range m.unlocked() {
		if strings.HasPrefix(filepath.Base(c), BinaryPrefix+kind+"-"+name) {
			return Spec{}, fmt.Errorf("%w: %s/%s is %s; run `kbplatform plugins lock` to pin it", ErrNotLocked, kind, name, c)
		}
	}
	return Spec{}, fmt.Errorf("%w: %s/%s (see `kbplatform plugins list`)", ErrUnknown, kind, name)
}

// unlocked lists plugin binaries on the third-party path.
func (m *Manager) unlocked() []string {
	var out []string
	for _, d := range m.opt.Dirs {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if e.IsDir() || !strings.HasPrefix(e.Name(), BinaryPrefix) {
				continue
			}
			p := filepath.Join(d, e.Name())
			if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
				out = append(out, p)
			}
		}
	}
	return out
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// client starts the process of spec, with the secret variables grant names, and connects to it.
func (m *Manager) client(spec Spec, grant []string) (*plugin.Client, *pluginhost.Remote, error) {
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Env = pluginEnv(os.Environ(), m.opt.Env, m.opt.Secrets, grant)
	// A session of its own: everything the plugin starts (workers, compilers), in whatever process
	// group, stays in this session and is killed with it. It dies with the host, too.
	cmd.SysProcAttr = pluginProcAttr()
	cfg := &plugin.ClientConfig{
		HandshakeConfig:  sdk.Handshake,
		Plugins:          pluginhost.PluginSet(),
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		GRPCDialOptions:  sdk.DialOptions(),
		Logger:           m.opt.Logger.Named(spec.Ref()),
		StartTimeout:     2 * time.Minute,
		// go-plugin would append the host's whole environment to cmd.Env, undoing pluginEnv.
		SkipHostEnv: true,
	}
	if m.opt.Stderr != nil {
		cfg.Stderr = m.opt.Stderr
	}
	if spec.Source == SourceThirdParty {
		want, err := hex.DecodeString(spec.SHA256)
		if err != nil || len(want) != sha256.Size {
			return nil, nil, fmt.Errorf("%w: bad checksum for %s in the lock file", ErrChecksumMismatch, spec.Path)
		}
		got, err := fileSHA256(spec.Path)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %s: %v", ErrStart, spec.Ref(), err)
		}
		if got != spec.SHA256 {
			return nil, nil, fmt.Errorf("%w: %s changed since it was locked (sha256 %s, locked %s); run `kbplatform plugins lock` to accept it", ErrChecksumMismatch, spec.Path, got[:16], short(spec.SHA256))
		}
		// go-plugin checks again right before exec.
		cfg.SecureConfig = &plugin.SecureConfig{Checksum: want, Hash: sha256.New()}
	}
	c := plugin.NewClient(cfg)
	rpc, err := c.Client()
	if err != nil {
		shutdown(c)
		return nil, nil, startError(spec, err)
	}
	raw, err := rpc.Dispense(sdk.PluginKey)
	if err != nil {
		shutdown(c)
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrStart, spec.Ref(), err)
	}
	r := raw.(*pluginhost.Remote)
	info := r.Info()
	if info.Kind != spec.Kind || info.Name != spec.Name {
		shutdown(c)
		return nil, nil, fmt.Errorf("%w: %s says it is %s/%s", ErrIdentity, spec.Path, info.Kind, info.Name)
	}
	return c, r, nil
}

func startError(spec Spec, err error) error {
	msg := err.Error()
	if strings.Contains(msg, "Incompatible API version") || strings.Contains(msg, "incompatible") {
		return fmt.Errorf("%w: %s speaks another plugin protocol than this kbplatform (protocol %d): %v", ErrStart, spec.Ref(), sdk.Protocol, err)
	}
	if errors.Is(err, plugin.ErrChecksumsDoNotMatch) {
		return fmt.Errorf("%w: %s: %v", ErrChecksumMismatch, spec.Path, err)
	}
	return fmt.Errorf("%w: %s (%s): %v", ErrStart, spec.Ref(), spec.Path, err)
}

// shutdown stops a plugin (gracefully first, as go-plugin does) and then kills whatever is left
// in its session.
func shutdown(c *plugin.Client) {
	rc := c.ReattachConfig()
	c.Kill()
	if rc != nil && rc.Pid > 0 {
		KillSession(rc.Pid)
	}
}

// killSession kills every process in the plugin's session (the plugin itself and all it started).
func killSession(c *plugin.Client) {
	rc := c.ReattachConfig()
	if rc == nil || rc.Pid <= 0 {
		return
	}
	KillSession(rc.Pid)
}

// KillSession sends SIGKILL to every process whose session id is sid.
func KillSession(sid int) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range entries {
		pid := 0
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || pid <= 1 {
			continue
		}
		if sessionOf(pid) == sid {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// sessionOf reads the session id from /proc/PID/stat (field 6).
func sessionOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(s[i+1:])
	// after the command: state ppid pgrp session ...
	if len(f) < 4 {
		return -1
	}
	sid := -1
	fmt.Sscanf(f[3], "%d", &sid)
	return sid
}

// Instance is a running plugin that restarts after a crash or a hang.
type Instance struct {
	m        *Manager
	spec     Spec
	config   json.RawMessage
	platform sdk.Platform
	grant    []string // the secret variables this instance's process receives
	mu       sync.Mutex
	client   *plugin.Client
	remote   *pluginhost.Remote
	starts   int
}

// Start resolves kind/name, starts it and configures it. platform, when not nil, is offered to the
// plugin (a strategy gets its own per run).
func (m *Manager) Start(ctx context.Context, ref string, config json.RawMessage, platform sdk.Platform) (*Instance, error) {
	kind, name, err := splitRef(ref)
	if err != nil {
		return nil, err
	}
	spec, err := m.Resolve(kind, name)
	if err != nil {
		return nil, err
	}
	// The environment is decided per instance, from its settings: two instances of model/openai
	// naming different keys each hold their own only.
	inst := &Instance{m: m, spec: spec, config: config, platform: platform, grant: m.grants(spec, config)}
	if _, err := inst.conn(ctx); err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.instances = append(m.instances, inst)
	m.mu.Unlock()
	return inst, nil
}

// Spec says what runs.
func (i *Instance) Spec() Spec { return i.spec }

// Info is the plugin's identity.
func (i *Instance) Info() sdk.Info {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.remote == nil {
		return sdk.Info{Kind: i.spec.Kind, Name: i.spec.Name}
	}
	return i.remote.Info()
}

// Starts counts how often the process was started (1 + restarts).
func (i *Instance) Starts() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.starts
}

// Pid is the plugin's process id (0 when not running).
func (i *Instance) Pid() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.client == nil {
		return 0
	}
	if rc := i.client.ReattachConfig(); rc != nil {
		return rc.Pid
	}
	return 0
}

// conn returns a live connection, (re)starting and configuring the plugin when needed.
func (i *Instance) conn(ctx context.Context) (*pluginhost.Remote, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.client != nil && !i.client.Exited() {
		return i.remote, nil
	}
	if i.client != nil {
		shutdown(i.client)
	}
	c, r, err := i.m.client(i.spec, i.grant)
	if err != nil {
		return nil, err
	}
	if err := r.Configure(ctx, i.config, i.platform); err != nil {
		shutdown(c)
		return nil, fmt.Errorf("configure %s: %w", i.spec.Ref(), err)
	}
	i.client, i.remote = c, r
	i.starts++
	return r, nil
}

// failed inspects an error from a call: a dead plugin or an expired call marks the process for a
// restart (a hung one is killed) and the error says so; other errors pass through.
func (i *Instance) failed(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	i.mu.Lock()
	c := i.client
	i.mu.Unlock()
	if c == nil {
		return err
	}
	if c.Exited() {
		killSession(c)
		return fmt.Errorf("%w: %s died during %s (it will be restarted for the next call): %v", ErrCrashed, i.spec.Ref(), op, err)
	}
	// The call's deadline passed: the plugin did not answer in time, however the transport
	// reported it (a deadline status, or a stream reset that lost the race on a loaded machine).
	// The clock decides, not only ctx.Err: the plugin's side of the call ends at the same
	// deadline (gRPC sends it along) and its reset can arrive before this process's context
	// timer has run.
	if dl, ok := ctx.Deadline(); errors.Is(ctx.Err(), context.DeadlineExceeded) || (ok && !time.Now().Before(dl)) {
		i.Kill()
		return fmt.Errorf("%w: %s did not answer %s in time; it was killed and will be restarted: %v", ErrHung, i.spec.Ref(), op, err)
	}
	// A connection-level failure while the process still runs: give it a moment to exit.
	if errors.Is(err, sdk.ErrUnavailable) {
		for k := 0; k < 20 && !c.Exited(); k++ {
			time.Sleep(50 * time.Millisecond)
		}
		if c.Exited() {
			killSession(c)
			return fmt.Errorf("%w: %s died during %s (it will be restarted for the next call): %v", ErrCrashed, i.spec.Ref(), op, err)
		}
	}
	return err
}

// Kill ends the plugin and every process in its session now.
func (i *Instance) Kill() {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.client == nil {
		return
	}
	rc := i.client.ReattachConfig()
	if rc != nil && rc.Pid > 0 {
		KillSession(rc.Pid) // a hung plugin gets no graceful shutdown
	}
	i.client.Kill()
	i.client, i.remote = nil, nil
}

// Close asks the plugin to exit, then kills what is left of its session.
func (i *Instance) Close() {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.client == nil {
		return
	}
	shutdown(i.client)
	i.client, i.remote = nil, nil
}

// Close ends every plugin this manager started.
func (m *Manager) Close() {
	m.mu.Lock()
	list := m.instances
	m.instances = nil
	m.mu.Unlock()
	for _, i := range list {
		i.Close()
	}
}

// Candidate is a plugin found on the system.
type Candidate struct {
	Spec
	Info    *sdk.Info `json:"info,omitempty"`
	Locked  bool      `json:"locked"`
	Active  bool      `json:"active"` // the one Resolve picks for its kind/name
	Problem string    `json:"problem,omitempty"`
}

// Scan lists built-ins, bundled binaries and third-party binaries; it starts each binary it trusts
// (built-in, bundled, locked) to read its identity. An unlocked third-party binary is never
// started: its kind and name are read from its file name, and `plugins lock` is what trusts it.
func (m *Manager) Scan(ctx context.Context) ([]Candidate, error) { return m.scan(ctx, false) }

// scan is Scan; startUnlocked starts unlocked third-party binaries too (for LockAll, which is the
// user's decision to trust them).
func (m *Manager) scan(ctx context.Context, startUnlocked bool) ([]Candidate, error) {
	lock, err := ReadLock(m.opt.LockFile)
	if err != nil {
		return nil, err
	}
	var out []Candidate
	add := func(spec Spec, locked bool) {
		c := Candidate{Spec: spec, Locked: locked}
		if spec.Source == SourceThirdParty && !locked && !startUnlocked {
			rest := strings.TrimPrefix(filepath.Base(spec.Path), BinaryPrefix)
			c.Kind, c.Name, _ = strings.Cut(rest, "-")
			c.Version = "?"
			out = append(out, c)
			return
		}
		info, err := m.inspect(spec)
		if err != nil {
			c.Problem = err.Error()
		} else {
			c.Info = &info
			c.Kind, c.Name, c.Version = info.Kind, info.Name, info.Version
		}
		out = append(out, c)
	}
	for _, p := range m.unlocked() {
		sum, _ := fileSHA256(p)
		locked := false
		for _, e := range lock.Plugins {
			if e.Path == p && e.SHA256 == sum {
				locked = true
			}
		}
		add(Spec{Source: SourceThirdParty, Path: p, SHA256: sum}, locked)
	}
	if m.opt.Exe != "" {
		matches, _ := filepath.Glob(filepath.Join(filepath.Dir(m.opt.Exe), BinaryPrefix+"*"))
		for _, p := range matches {
			add(Spec{Source: SourceBundled, Path: p}, true)
		}
	}
	for _, b := range m.opt.Builtins {
		kind, name, _ := splitRef(b)
		add(Spec{Kind: kind, Name: name, Source: SourceBuiltin, Path: m.opt.Exe, Args: []string{"plugin", "serve", b}}, true)
	}
	for i := range out {
		if out[i].Kind == "" {
			continue
		}
		if spec, err := m.Resolve(out[i].Kind, out[i].Name); err == nil && spec.Path == out[i].Path && spec.Source == out[i].Source {
			out[i].Active = true
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Ref() < out[b].Ref() })
	return out, nil
}

// inspect starts a binary only to read its Info.
func (m *Manager) inspect(spec Spec) (sdk.Info, error) {
	s := spec
	if s.Source == SourceThirdParty {
		got, err := fileSHA256(s.Path)
		if err != nil {
			return sdk.Info{}, fmt.Errorf("%w: %v", ErrStart, err)
		}
		if got != s.SHA256 {
			return sdk.Info{}, fmt.Errorf("%w: %s changed since it was locked (sha256 %s, locked %s); run `kbplatform plugins lock` to accept it", ErrChecksumMismatch, s.Path, got[:16], short(s.SHA256))
		}
	}
	cmd := exec.Command(s.Path, s.Args...)
	cmd.Env = pluginEnv(os.Environ(), m.opt.Env, m.opt.Secrets, nil) // its kind is not known yet: no secret
	cmd.SysProcAttr = pluginProcAttr()
	c := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  sdk.Handshake,
		Plugins:          pluginhost.PluginSet(),
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		GRPCDialOptions:  sdk.DialOptions(),
		Logger:           m.opt.Logger.Named("inspect"),
		StartTimeout:     time.Minute,
		SkipHostEnv:      true,
	})
	defer shutdown(c)
	rpc, err := c.Client()
	if err != nil {
		return sdk.Info{}, startError(s, err)
	}
	raw, err := rpc.Dispense(sdk.PluginKey)
	if err != nil {
		return sdk.Info{}, err
	}
	return raw.(*pluginhost.Remote).Info(), nil
}

// Inspect starts the plugin that Resolve picks for ref and returns its identity.
func (m *Manager) Inspect(ref string) (Spec, sdk.Info, error) {
	kind, name, err := splitRef(ref)
	if err != nil {
		return Spec{}, sdk.Info{}, err
	}
	spec, err := m.Resolve(kind, name)
	if err != nil {
		return Spec{}, sdk.Info{}, err
	}
	info, err := m.inspect(spec)
	return spec, info, err
}

func short(h string) string {
	if len(h) > 16 {
		return h[:16]
	}
	return h
}
