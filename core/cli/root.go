// Package cli is kbplatform's command line: a cobra command tree configured through viper
// (flag > KBP_ environment variable > kbplatform.yaml > default), a fresh viper per command.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/kbplatform/kbplatform/core/contract"
	"github.com/kbplatform/kbplatform/core/plugins"
	"github.com/kbplatform/kbplatform/core/registry"
	"github.com/kbplatform/kbplatform/core/store"
	"github.com/kbplatform/kbplatform/sdk"
	"github.com/kbplatform/kbplatform/tasks"
)

// Version is set at build time (-ldflags "-X .../core/cli.Version=...").
var Version = "dev"

// app carries what a command needs; built fresh for every invocation.
type app struct {
	ctx    context.Context
	out    io.Writer
	errOut io.Writer
	v      *viper.Viper
	cfg    *settings
}

// settings is the resolved configuration of one command.
type settings struct {
	DB             string
	Python         string
	Device         string
	Size           string
	WorkDir        string
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

func newViper(cmd *cobra.Command) (*viper.Viper, error) {
	v := viper.New()
	data, cache, work := defaultDirs()
	d := contract.Defaults()
	v.SetDefault("db", filepath.Join(data, "db"))
	v.SetDefault("python", "")
	v.SetDefault("device", "auto")
	v.SetDefault("size", "auto")
	v.SetDefault("work_dir", work)
	v.SetDefault("cache_dir", cache)
	v.SetDefault("quiet", false)
	v.SetDefault("compile_workers", 4)
	v.SetDefault("target", "local")
	v.SetDefault("plugin_dir", []string{})
	v.SetDefault("plugin_lock", filepath.Join(data, "plugins.lock"))
	v.SetDefault("log_level", "warn")
	v.SetDefault("contract.seeds", d.Seeds)
	v.SetDefault("contract.timed_calls", d.TimedCalls)
	v.SetDefault("contract.warmup", d.Warmup)
	v.SetDefault("contract.check_calls", d.CheckCalls)
	v.SetDefault("contract.noop_calls", d.NoopCalls)
	v.SetDefault("contract.seed", 0)
	v.SetDefault("contract.timeout", d.Timeout)
	v.SetDefault("contract.call_timeout", d.CallTimeout)
	v.SetDefault("contract.compile_timeout", d.CompileTimeout)
	v.SetDefault("contract.cpu_threads", d.CPUThreads)
	v.SetDefault("contract.no_flush", false)
	v.SetDefault("contract.poison", d.Poison)
	v.SetDefault("contract.log_limit", d.LogLimit)

	v.SetEnvPrefix("KBP")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_", "-", "_"))
	v.AutomaticEnv()

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
	if cfgFile != "" {
		v.SetConfigFile(cfgFile)
		if err := v.ReadInConfig(); err != nil {
			return nil, fmt.Errorf("read config %s: %w", cfgFile, err)
		}
		return v, nil
	}
	v.SetConfigName("kbplatform")
	v.SetConfigType("yaml")
	v.AddConfigPath(".")
	if dir, err := os.UserConfigDir(); err == nil {
		v.AddConfigPath(filepath.Join(dir, "kbplatform"))
	}
	if err := v.ReadInConfig(); err != nil {
		var nf viper.ConfigFileNotFoundError
		if !errors.As(err, &nf) {
			return nil, fmt.Errorf("read config: %w", err)
		}
	}
	return v, nil
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
		ConfigFile:     v.ConfigFileUsed(),
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
	if err := root.ExecuteContext(ctx); err != nil {
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
		a.pluginsCmd(), a.pluginCmd(), a.studyCmd())
	return root
}

// addContractFlags adds the flags that tune the contract.
func addContractFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.String("device", "", "cpu or cuda:N (default: auto, the GPU when one is present)")
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
	inst, err := m.Start(a.ctx, ref, a.targetConfig(), nil)
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

func (a *app) openStore() (*store.Store, error) {
	return store.Open(a.cfg.DB)
}

// openWithRegistry opens the store and loads the tasks it knows with the suite.
func (a *app) openWithRegistry() (*store.Store, *registry.Registry, error) {
	st, err := a.openStore()
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
