package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/kbplatform/kbplatform/internal/plugins"
	"github.com/kbplatform/kbplatform/plugins/backends/cpp"
	"github.com/kbplatform/kbplatform/plugins/backends/cuda"
	"github.com/kbplatform/kbplatform/plugins/backends/cutlass"
	"github.com/kbplatform/kbplatform/plugins/backends/triton"
	"github.com/kbplatform/kbplatform/plugins/models/anthropic"
	"github.com/kbplatform/kbplatform/plugins/models/gemini"
	"github.com/kbplatform/kbplatform/plugins/models/openai"
	"github.com/kbplatform/kbplatform/plugins/models/replay"
	"github.com/kbplatform/kbplatform/plugins/strategies/backtrack"
	"github.com/kbplatform/kbplatform/plugins/strategies/oneshot"
	"github.com/kbplatform/kbplatform/plugins/strategies/refine"
	"github.com/kbplatform/kbplatform/plugins/strategies/sampling"
	"github.com/kbplatform/kbplatform/plugins/targets/cluster"
	"github.com/kbplatform/kbplatform/plugins/targets/local"
	"github.com/kbplatform/kbplatform/sdk"
)

// builtins are the plugins compiled into kbplatform; they still run out of process, as
// `kbplatform plugin serve <kind>/<name>`.
var builtins = map[string]func() sdk.Plugin{
	"target/local":     func() sdk.Plugin { return local.New() },
	"target/cluster":   func() sdk.Plugin { return cluster.New() },
	"backend/cpp":      func() sdk.Plugin { return cpp.New() },
	"backend/cuda":     func() sdk.Plugin { return cuda.New() },
	"backend/triton":   func() sdk.Plugin { return triton.New() },
	"backend/cutlass":  func() sdk.Plugin { return cutlass.New() },
	"strategy/oneshot": func() sdk.Plugin { return oneshot.New() },
	"model/replay":     func() sdk.Plugin { return replay.New() },
	"model/openai":     func() sdk.Plugin { return openai.New() },
	"model/anthropic":  func() sdk.Plugin { return anthropic.New() },
	"model/gemini":     func() sdk.Plugin { return gemini.New() },

	// The search strategies beyond oneshot (docs/strategies.md).
	"strategy/sampling":  func() sdk.Plugin { return sampling.New() },
	"strategy/refine":    func() sdk.Plugin { return refine.New() },
	"strategy/backtrack": func() sdk.Plugin { return backtrack.New() },
}

// builtinSecrets name the secret variables a built-in plugin reads under its settings, beyond
// what a model's api_key_env names: a provider's default key, the cluster target's password.
// Every other secret of the host's environment stays out of the plugin's process.
var builtinSecrets = map[string]func(json.RawMessage) []string{
	"model/openai":    openai.SecretEnv,
	"model/anthropic": anthropic.SecretEnv,
	"model/gemini":    gemini.SecretEnv,
	"target/cluster":  func(json.RawMessage) []string { return []string{cluster.EnvPassword} },
}

// grantBuiltin is the plugin manager's Grant: a built-in's own secrets. A third-party binary
// that takes a built-in's name gets what its settings name, not the built-in's defaults.
func grantBuiltin(spec plugins.Spec, config json.RawMessage) []string {
	if f := builtinSecrets[spec.Ref()]; f != nil && spec.Source != plugins.SourceThirdParty {
		return f(config)
	}
	return nil
}

func builtinRefs() []string {
	out := make([]string, 0, len(builtins))
	for k := range builtins {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// pluginDirs is the third-party plugin path: --plugin-dir, KBP_PLUGIN_PATH, ./.kbplatform/plugins,
// then the user data dir.
func (a *app) pluginDirs() []string {
	var dirs []string
	dirs = append(dirs, a.v.GetStringSlice("plugin_dir")...)
	if p := os.Getenv("KBP_PLUGIN_PATH"); p != "" {
		dirs = append(dirs, filepath.SplitList(p)...)
	}
	dirs = append(dirs, filepath.Join(".kbplatform", "plugins"))
	data, _, _ := defaultDirs()
	dirs = append(dirs, filepath.Join(data, "plugins"))
	var out []string
	for _, d := range dirs {
		if abs, err := filepath.Abs(d); err == nil {
			d = abs
		}
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// pluginManager starts plugins; secrets name environment variables (API keys) that only a
// model plugin naming them may see, besides every variable whose name marks a credential.
func (a *app) pluginManager(secrets ...string) *plugins.Manager {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	// The keys of the configuration file's named models stay hidden in every command, not only
	// in the studies that use them (a file it cannot read is reported where models are used).
	if ms, err := a.loadModelSettings(); err == nil {
		secrets = append(secrets, ms.keyVariables(nil)...)
	}
	level := hclog.LevelFromString(a.v.GetString("log_level"))
	if level == hclog.NoLevel {
		level = hclog.Warn
	}
	return plugins.New(plugins.Options{
		Exe:      exe,
		Dirs:     a.pluginDirs(),
		LockFile: a.v.GetString("plugin_lock"),
		Builtins: builtinRefs(),
		Logger:   hclog.New(&hclog.LoggerOptions{Name: "plugin", Level: level, Output: a.errOut}),
		Secrets:  secrets,
		Grant:    grantBuiltin,
	})
}

// targetConfig is what the local target needs from the host's settings.
func (a *app) targetConfig() json.RawMessage {
	b, _ := json.Marshal(map[string]string{"python": a.cfg.Python, "work_dir": a.cfg.WorkDir, "cache_dir": a.cfg.CacheDir, "sandbox": a.cfg.Sandbox})
	return b
}

func (a *app) pluginCmd() *cobra.Command {
	serve := &cobra.Command{
		Use:    "serve KIND/NAME",
		Short:  "Serve a built-in plugin (kbplatform runs this itself)",
		Args:   cobra.ExactArgs(1),
		Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			mk, ok := builtins[args[0]]
			if !ok {
				return fmt.Errorf("no built-in plugin %q (built-ins: %s)", args[0], strings.Join(builtinRefs(), ", "))
			}
			impl := mk()
			sdk.Serve(impl)
			if c, ok := impl.(interface{ Close() }); ok {
				c.Close()
			}
			return nil
		},
	}
	cmd := &cobra.Command{Use: "plugin", Hidden: true, Short: "Plugin process entry points"}
	cmd.AddCommand(serve)
	return cmd
}

func (a *app) pluginsCmd() *cobra.Command {
	cmd := groupCmd("plugins", "List, lock and inspect plugins")
	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List built-in, bundled and third-party plugins with their identity and lock state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m := a.pluginManager()
			cands, err := m.Scan(a.ctx)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.out, cands)
			}
			tw := tabwriter.NewWriter(a.out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "PLUGIN\tVERSION\tSOURCE\tSTATE\tPATH")
			for _, c := range cands {
				ref := c.Ref()
				if c.Kind == "" {
					ref = "?"
				}
				state := "in use"
				switch {
				case c.Problem != "":
					state = "broken: " + firstLines(c.Problem, 1, 100)[0]
				case !c.Locked:
					state = "not locked"
				case !c.Active:
					state = "shadowed"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", ref, c.Version, c.Source, state, c.Path)
			}
			tw.Flush()
			fmt.Fprintf(a.out, "plugin path: %s\nlock file:   %s\n", strings.Join(a.pluginDirs(), string(os.PathListSeparator)), a.v.GetString("plugin_lock"))
			return nil
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	lock := &cobra.Command{
		Use:   "lock",
		Short: "Pin every third-party plugin binary on the plugin path (sha256 + identity)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m := a.pluginManager()
			l, problems, err := m.LockAll(a.ctx)
			if err != nil {
				return err
			}
			for _, e := range l.Plugins {
				fmt.Fprintf(a.out, "locked %s/%s %s  %s  sha256 %s\n", e.Kind, e.Name, e.Version, e.Path, e.SHA256[:16])
			}
			paths := make([]string, 0, len(problems))
			for p := range problems {
				paths = append(paths, p)
			}
			sort.Strings(paths)
			for _, p := range paths {
				fmt.Fprintf(a.out, "not locked %s: %s\n", p, problems[p])
			}
			fmt.Fprintf(a.out, "%d plugin(s) locked in %s\n", len(l.Plugins), a.v.GetString("plugin_lock"))
			return nil
		},
	}
	inspect := &cobra.Command{
		Use:   "inspect KIND/NAME",
		Short: "Start a plugin and show what it reports: version, capabilities, config schema",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m := a.pluginManager()
			spec, info, err := m.Inspect(args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.out, map[string]any{"spec": spec, "info": info})
			}
			fmt.Fprintf(a.out, "plugin        %s/%s %s (%s)\n", info.Kind, info.Name, info.Version, spec.Source)
			fmt.Fprintf(a.out, "path          %s %s\n", spec.Path, strings.Join(spec.Args, " "))
			fmt.Fprintf(a.out, "protocol      %d (sdk %s)\n", info.Protocol, info.SDKVersion)
			if info.Description != "" {
				fmt.Fprintf(a.out, "description   %s\n", info.Description)
			}
			if len(info.Capabilities) > 0 {
				fmt.Fprintf(a.out, "capabilities  %s\n", strings.Join(info.Capabilities, ", "))
			}
			if info.ConfigSchema != "" {
				fmt.Fprintf(a.out, "config schema\n%s\n", info.ConfigSchema)
			}
			if info.Kind == sdk.KindTarget {
				a.inspectTarget(m, info.Kind+"/"+info.Name)
			}
			return nil
		},
	}
	inspect.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(list, lock, inspect)
	return cmd
}
