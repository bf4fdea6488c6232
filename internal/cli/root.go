// Package cli is kbplatform's command line: a cobra command tree configured through viper
// (flag > KBP_ environment variable > kbplatform.yaml > default), a fresh viper per command.
package cli

import (
	"context"
	"errors"
	"fmt"
	"github.com/kbplatform/kbplatform/internal/sandbox"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/kbplatform/kbplatform/internal/contract"
	"github.com/kbplatform/kbplatform/internal/plugins"
	"github.com/kbplatform/kbplatform/internal/queue"
	"github.com/kbplatform/kbplatform/internal/registry"
	"github.com/kbplatform/kbplatform/internal/store"
	"github.com/kbplatform/kbplatform/sdk"
	"github.com/kbplatform/kbplatform/tasks"
)

// Version is set at build time (-ldflags "-X .../internal/cli.Version=...").
var Version = "dev"

// app carries what a command needs; built fresh for every invocation.
type app struct {
	ctx    context.Context
	out    io.Writer
	errOut io.Writer
	v      *viper.Viper
	cfg    *settings
	// embedded is the JetStream server this command started for target/cluster (cluster.go).
	embedded *queue.Embedded
	// atExit runs when the command has finished.
	atExit []func()
}

// settings is the resolved configuration of one command.
type settings struct {
	DB             string
	Python         string
	Device         string
	Size           string
	WorkDir        string
	Sandbox        string // best-effort or require (docs/contract.md, "Sandbox")
	CacheDir       string
	Quiet          bool
	CompileWorkers int
	Contract       contract.Config
	ConfigFile     string
}

// flagKeys maps flag names to configuration keys where they differ.
var flagKeys = map[string]string{
	"seeds":           "contract.seeds",
	"timed-calls":     "contract.timed_calls",
	"warmup":          "contract.warmup",
	"check-calls":     "contract.check_calls",
	"seed":            "contract.seed",
	"timeout":         "contract.timeout",
	"call-timeout":    "contract.call_timeout",
	"compile-timeout": "contract.compile_timeout",
	"cpu-threads":     "contract.cpu_threads",
	"no-flush":        "contract.no_flush",
}

func defaultDirs() (data, cache, work string) {
	home, _ := os.UserHomeDir()
	data = os.Getenv("XDG_DATA_HOME")
	if data == "" {
		data = filepath.Join(home, ".local", "share")
	}
	data = filepath.Join(data, "kbplatform")
	c, err := os.UserCacheDir()
	if err != nil {
		c = os.TempDir()
	}
	cache = filepath.Join(c, "kbplatform")
	work = filepath.Join(os.TempDir(), fmt.Sprintf("kbplatform-%d", os.Getuid()))
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		work = filepath.Join("/dev/shm", fmt.Sprintf("kbplatform-%d", os.Getuid()))
	}
	return data, cache, work
}

// settingDefaults is every setting a configuration file may hold, with its default (whose type
// is the setting's type).
func settingDefaults() map[string]any {
	data, cache, work := defaultDirs()
	d := contract.Defaults()
	out := map[string]any{
		"db":                       filepath.Join(data, "db"),
		"python":                   "",
		"device":                   "auto",
		"size":                     "auto",
		"work_dir":                 work,
		"cache_dir":                cache,
		"quiet":                    false,
		"compile_workers":          4,
		"target":                   "local",
		"plugin_dir":               []string{},
		"plugin_lock":              filepath.Join(data, "plugins.lock"),
		"log_level":                "warn",
		"memory_share":             defaultMemoryShare,
		"sandbox":                  "best-effort",
		"contract.seeds":           d.Seeds,
		"contract.timed_calls":     d.TimedCalls,
		"contract.warmup":          d.Warmup,
		"contract.check_calls":     d.CheckCalls,
		"contract.noop_calls":      d.NoopCalls,
		"contract.seed":            0,
		"contract.timeout":         d.Timeout,
		"contract.call_timeout":    d.CallTimeout,
		"contract.compile_timeout": d.CompileTimeout,
		"contract.cpu_threads":     d.CPUThreads,
		"contract.no_flush":        false,
		"contract.poison":          d.Poison,
		"contract.log_limit":       d.LogLimit,
	}
	for k, v := range clusterDefaults() {
		out[k] = v
	}
	return out
}

func newViper(cmd *cobra.Command) (*viper.Viper, error) {
	v := viper.New()
	defaults := settingDefaults()
	for k, val := range defaults {
		v.SetDefault(k, val)
	}

	v.SetEnvPrefix("KBP")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_", "-", "_"))
	v.AutomaticEnv()
	if err := checkEnv(defaults); err != nil {
		return nil, err
	}

	bind := func(f *pflag.Flag) {
		if f.Name == "config" || f.Name == "help" {
			return
		}
		key, ok := flagKeys[f.Name]
		if !ok {
			key = strings.ReplaceAll(f.Name, "-", "_")
		}
		_ = v.BindPFlag(key, f)
	}
	cmd.Flags().VisitAll(bind)
	cmd.InheritedFlags().VisitAll(bind)

	cfgFile, _ := cmd.Flags().GetString("config")
	if cfgFile == "" {
		cfgFile = os.Getenv("KBP_CONFIG")
	}
	if cfgFile == "" {
		cfgFile = findConfigFile()
	}
	if cfgFile == "" {
		return v, nil
	}
	v.SetConfigFile(cfgFile)
	if ext := filepath.Ext(cfgFile); ext != ".json" && ext != ".toml" {
		v.SetConfigType("yaml")
	}
	if err := v.ReadInConfig(); err != nil {
		return nil, fmt.Errorf("config file %s: %w", cfgFile, err)
	}
	if err := checkConfigFile(cfgFile, defaults); err != nil {
		return nil, err
	}
	return v, nil
}

// findConfigFile is the first kbplatform.yaml (or .yml) in the current folder, then in the user
// config dir. Only those names: a binary called kbplatform in the current folder is no config.
func findConfigFile() string {
	dirs := []string{"."}
	if dir, err := os.UserConfigDir(); err == nil {
		dirs = append(dirs, filepath.Join(dir, "kbplatform"))
	}
	for _, d := range dirs {
		for _, name := range []string{"kbplatform.yaml", "kbplatform.yml"} {
			p := filepath.Join(d, name)
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
				if abs, err := filepath.Abs(p); err == nil {
					return abs
				}
				return p
			}
		}
	}
	return ""
}

func resolve(v *viper.Viper) (*settings, error) {
	s := &settings{
		DB:             v.GetString("db"),
		Python:         v.GetString("python"),
		Device:         v.GetString("device"),
		Size:           v.GetString("size"),
		WorkDir:        v.GetString("work_dir"),
		CacheDir:       v.GetString("cache_dir"),
		Quiet:          v.GetBool("quiet"),
		CompileWorkers: v.GetInt("compile_workers"),
		Sandbox:        v.GetString("sandbox"),
		ConfigFile:     v.ConfigFileUsed(),
	}
	if err := checkDeviceSetting(s.Device); err != nil {
		return nil, err
	}
	if _, err := sandbox.ParseMode(s.Sandbox); err != nil {
		return nil, err
	}
	c := contract.Defaults()
	c.Seeds = v.GetInt("contract.seeds")
	c.TimedCalls = v.GetInt("contract.timed_calls")
	c.Warmup = v.GetInt("contract.warmup")
	c.CheckCalls = min(v.GetInt("contract.check_calls"), c.TimedCalls)
	c.NoopCalls = v.GetInt("contract.noop_calls")
	c.Seed = v.GetInt64("contract.seed")
	c.Timeout = v.GetDuration("contract.timeout")
	c.CallTimeout = v.GetDuration("contract.call_timeout")
	c.CompileTimeout = v.GetDuration("contract.compile_timeout")
	c.CPUThreads = v.GetInt("contract.cpu_threads")
	c.FlushCache = !v.GetBool("contract.no_flush")
	c.Poison = v.GetBool("contract.poison")
	c.LogLimit = v.GetInt("contract.log_limit")
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if sh := v.GetFloat64("memory_share"); sh <= 0 || sh > 1 {
		return nil, fmt.Errorf("memory_share %v: want the share of RAM a CPU evaluation may need, above 0 and at most 1", sh)
	}
	s.Contract = c
	return s, nil
}

// Execute runs the command line and returns the process exit code.
func Execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := &app{ctx: ctx, out: stdout, errOut: stderr}
	root := a.rootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	for i := len(a.atExit) - 1; i >= 0; i-- {
		a.atExit[i]()
	}
	if err != nil {
		fmt.Fprintf(stderr, "kbplatform: %v\n", err)
		var ee exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		return 1
	}
	return 0
}

// exitError carries a specific exit code (e.g. 3: an evaluation failed its verdict).
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "kbplatform",
		Short:         "Evaluate LLM-written kernels against PyTorch: correct, and how much faster",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			v, err := newViper(cmd)
			if err != nil {
				return err
			}
			cfg, err := resolve(v)
			if err != nil {
				return err
			}
			a.v, a.cfg = v, cfg
			return nil
		},
	}
	pf := root.PersistentFlags()
	pf.String("config", "", "configuration file (default: ./kbplatform.yaml, then the user config dir)")
	pf.String("db", "", "database folder (default: the user data dir)")
	pf.String("python", "", "python interpreter with torch (default: the first found that imports torch)")
	pf.String("work-dir", "", "scratch folder for output dumps (default: /dev/shm when present)")
	pf.String("cache-dir", "", "cache folder for kernel builds and the worker")
	pf.BoolP("quiet", "q", false, "no progress output")
	pf.StringSlice("plugin-dir", nil, "folder with third-party plugin binaries (repeatable; also KBP_PLUGIN_PATH)")
	pf.String("plugin-lock", "", "plugin lock file (default: the user data dir's plugins.lock)")
	pf.String("log-level", "", "plugin log level: error, warn, info, debug, trace")
	root.AddCommand(a.versionCmd(), a.configCmd(), a.tasksCmd(), a.evalCmd(), a.baselineCmd(), a.resultsCmd(),
		a.pluginsCmd(), a.pluginCmd(), a.studyCmd(), a.targetCmd(), a.workerCmd(), a.sandboxCmd(), a.dbCmd(), a.campaignCmd())
	return root
}

// groupCmd is a command that only holds subcommands. Cobra would print its help and exit 0 for a
// word it does not know (`results delete x`); this refuses it, naming what was meant.
func groupCmd(use, short string) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
			var names []string
			for _, c := range cmd.Commands() {
				if c.IsAvailableCommand() {
					names = append(names, c.Name())
				}
			}
			if n := sdk.Nearest(args[0], names); n != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", n)
			}
			return fmt.Errorf("%s; its commands: %s", msg, strings.Join(names, ", "))
		},
	}
}

// addContractFlags adds the flags that tune the contract.
func addContractFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.String("device", "", "cpu or cuda:N; eval, baseline and study run also take all (every GPU) or a list cuda:0,cuda:2 (default: auto, the GPU when one is present)")
	f.String("size", "", "task size: cpu, gpu or default (default: auto, by device)")
	f.Int("seeds", 0, "correctness seeds per input distribution (default 5)")
	f.Int("timed-calls", 0, "timed calls per side (default 100)")
	f.Int("warmup", 0, "warm-up calls before timing (default 5)")
	f.Int("check-calls", 0, "timed outputs re-checked against the reference (default 10)")
	f.Int64("seed", 0, "fix the evaluation's seeds (default: fresh seeds per evaluation)")
	f.Duration("timeout", 0, "limit for one whole evaluation (default 15m)")
	f.Duration("call-timeout", 0, "limit for one call into a worker (default 2m)")
	f.Duration("compile-timeout", 0, "limit for compiling one candidate (default 10m)")
	f.Int("cpu-threads", 0, "torch threads for CPU evaluations (default 1)")
	f.Bool("no-flush", false, "do not flush caches between timed calls")
	f.Int("compile-workers", 0, "candidates compiled ahead of a GPU (default 4)")
	f.String("target", "", "target plugin to evaluate on (default: local)")
}

func (a *app) progress(format string, args ...any) {
	if a.cfg.Quiet {
		return
	}
	fmt.Fprintf(a.errOut, "· "+format+"\n", args...)
}

// target starts the configured target plugin and reads its hardware.
func (a *app) target(m *plugins.Manager) (*plugins.Instance, *sdk.Hardware, error) {
	ref := a.v.GetString("target")
	if !strings.Contains(ref, "/") {
		ref = "target/" + ref
	}
	cfg := a.targetConfig()
	if ref == "target/cluster" {
		var err error
		if cfg, err = a.targetSettings(ref, nil); err != nil {
			return nil, nil, err
		}
	}
	inst, err := m.Start(a.ctx, ref, cfg, nil)
	if err != nil {
		return nil, nil, err
	}
	hw, err := inst.Target().Describe(a.ctx)
	if err != nil {
		inst.Close()
		return nil, nil, fmt.Errorf("%s: %w", ref, err)
	}
	return inst, hw, nil
}

// device resolves "auto": the target's first GPU, else its CPU.
func (a *app) device(hw *sdk.Hardware) string {
	d := a.cfg.Device
	if d != "" && d != "auto" {
		return d
	}
	for _, dev := range hw.Devices {
		if dev.Kind == "cuda" {
			return dev.Name
		}
	}
	return "cpu"
}

// progressSince prints target progress with the time since start.
func (a *app) progressSince(start time.Time) sdk.Progress {
	return func(msg string) { a.progress("%5.1fs %s", time.Since(start).Seconds(), msg) }
}

// openStore opens the database, or goes through the kbplatform process that holds it.
func (a *app) openStore() (*store.Store, error) {
	return store.OpenWith(a.cfg.DB, store.Options{Notice: func(m string) { a.progress("%s", m) }})
}

// readStore opens the database for a command that only reads: read-only, or through the process
// that holds it; it never creates, compacts or deletes a file, and a folder the user may not write
// can be read.
func (a *app) readStore() (*store.Store, error) {
	return store.OpenWith(a.cfg.DB, store.Options{ReadOnly: true, Notice: func(m string) { a.progress("%s", m) }})
}

// openWithRegistry opens the store and loads the tasks it knows with the suite.
func (a *app) openWithRegistry() (*store.Store, *registry.Registry, error) {
	return a.withRegistry(a.openStore)
}

// readWithRegistry is openWithRegistry for a command that only reads.
func (a *app) readWithRegistry() (*store.Store, *registry.Registry, error) {
	return a.withRegistry(a.readStore)
}

func (a *app) withRegistry(open func() (*store.Store, error)) (*store.Store, *registry.Registry, error) {
	st, err := open()
	if err != nil {
		return nil, nil, err
	}
	reg, err := a.registry(st)
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, reg, nil
}

// registry loads the suite plus every task imported into the store.
func (a *app) registry(st *store.Store) (*registry.Registry, error) {
	suite, err := registry.LoadSuite(tasks.FS)
	if err != nil {
		return nil, fmt.Errorf("bundled suite: %w", err)
	}
	reg := registry.NewRegistry(suite)
	if st != nil {
		recs, err := st.Tasks()
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			t, err := taskFromRecord(r)
			if err != nil {
				fmt.Fprintf(a.errOut, "warning: stored task %s: %v\n", r.ID, err)
				continue
			}
			reg.Add(t)
		}
	}
	return reg, nil
}
