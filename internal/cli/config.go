package cli

import (
	"fmt"
	"github.com/kbplatform/kbplatform/internal/sandbox"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kbplatform/kbplatform/internal/pyenv"
)

func (a *app) configCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Print every setting as resolved (flag > KBP_ environment > kbplatform.yaml > default) and the Python found",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := a.cfg
			// The interpreter the local target will use, as it finds it.
			found := map[string]any{}
			if py, err := pyenv.Find(a.ctx, c.Python); err == nil {
				found = map[string]any{"path": py.Path, "python": py.Version, "torch": py.Torch, "cuda": py.CUDA, "gpus": len(py.GPUs)}
			} else {
				found["error"] = err.Error()
			}
			settings := map[string]any{
				"config_file": c.ConfigFile, "db": c.DB, "python": c.Python, "python_found": found, "device": c.Device, "size": c.Size,
				"work_dir": c.WorkDir, "cache_dir": c.CacheDir, "quiet": c.Quiet, "compile_workers": c.CompileWorkers,
				"target": a.v.GetString("target"), "plugin_dir": a.v.GetStringSlice("plugin_dir"), "plugin_path": a.pluginDirs(),
				"plugin_lock": a.v.GetString("plugin_lock"), "log_level": a.v.GetString("log_level"),
				"memory_share": a.v.GetFloat64("memory_share"), "sandbox": c.Sandbox, "contract": c.Contract,
				"cluster": map[string]any{"url": a.v.GetString("cluster.url"), "listen": a.v.GetString("cluster.listen"),
					"gpu_kinds": a.v.GetStringSlice("cluster.gpu_kinds"), "user": a.v.GetString("cluster.user"),
					"password_set": a.v.GetString("cluster.password") != "", "nkey_file": a.v.GetString("cluster.nkey_file"),
					"ack_wait": a.v.GetDuration("cluster.ack_wait").String(), "max_deliver": a.v.GetInt("cluster.max_deliver")},
			}
			if asJSON {
				return printJSON(a.out, settings)
			}
			file := c.ConfigFile
			if file == "" {
				file = "(none found)"
			}
			row := func(k, format string, v ...any) { fmt.Fprintf(a.out, "%-24s "+format+"\n", append([]any{k}, v...)...) }
			row("config file", "%s", file)
			row("db", "%s", c.DB)
			row("python", "%s", orDefault(c.Python, "(auto: first interpreter that imports torch)"))
			if p, ok := found["path"]; ok {
				row("  found", "%s (python %s, torch %s, CUDA %s, %d GPU(s))", p, found["python"], found["torch"], orDefault(fmt.Sprint(found["cuda"]), "none"), found["gpus"])
			} else {
				row("  found", "none: %s", found["error"])
			}
			row("device", "%s", c.Device)
			row("size", "%s", c.Size)
			row("target", "%s", a.v.GetString("target"))
			row("work_dir", "%s", c.WorkDir)
			row("cache_dir", "%s", c.CacheDir)
			row("compile_workers", "%d", c.CompileWorkers)
			row("memory_share", "%.2f of RAM for a CPU evaluation", a.v.GetFloat64("memory_share"))
			mode, _ := sandbox.ParseMode(c.Sandbox)
			row("sandbox", "%s (here: %s)", c.Sandbox, sandbox.StatusFor(mode))
			row("quiet", "%v", c.Quiet)
			row("log_level", "%s", a.v.GetString("log_level"))
			row("plugin_lock", "%s", a.v.GetString("plugin_lock"))
			row("plugin_dir", "%s", orDefault(strings.Join(a.v.GetStringSlice("plugin_dir"), ":"), "(none)"))
			row("  plugin path", "%s", strings.Join(a.pluginDirs(), ":"))
			k := c.Contract
			row("contract.seeds", "%d", k.Seeds)
			row("contract.timed_calls", "%d", k.TimedCalls)
			row("contract.warmup", "%d", k.Warmup)
			row("contract.check_calls", "%d", k.CheckCalls)
			row("contract.noop_calls", "%d", k.NoopCalls)
			row("contract.seed", "%d (0: fresh seeds per evaluation)", k.Seed)
			row("contract.cpu_threads", "%d", k.CPUThreads)
			row("contract.no_flush", "%v", !k.FlushCache)
			row("contract.poison", "%v", k.Poison)
			row("contract.log_limit", "%d bytes", k.LogLimit)
			row("contract.timeout", "%s", k.Timeout)
			row("contract.call_timeout", "%s", k.CallTimeout)
			row("contract.compile_timeout", "%s", k.CompileTimeout)
			row("cluster.url", "%s", orDefault(a.v.GetString("cluster.url"), "(none: an embedded server, listening on cluster.listen)"))
			row("cluster.listen", "%s", a.v.GetString("cluster.listen"))
			row("cluster.gpu_kinds", "%s", orDefault(strings.Join(a.v.GetStringSlice("cluster.gpu_kinds"), ","), "(those of the workers connected)"))
			row("cluster.user", "%s", orDefault(a.v.GetString("cluster.user"), "(none)"))
			row("cluster.password", "%s", map[bool]string{true: "(set)", false: "(none)"}[a.v.GetString("cluster.password") != ""])
			row("cluster.nkey_file", "%s", orDefault(a.v.GetString("cluster.nkey_file"), "(none)"))
			row("cluster.ack_wait", "%s", a.v.GetDuration("cluster.ack_wait"))
			row("cluster.max_deliver", "%d", a.v.GetInt("cluster.max_deliver"))
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	addContractFlags(cmd)
	return cmd
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
