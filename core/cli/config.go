package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) configCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Print the resolved configuration (flag > KBP_ environment > kbplatform.yaml > default)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := a.cfg
			if asJSON {
				return printJSON(a.out, map[string]any{
					"config_file": c.ConfigFile, "db": c.DB, "python": c.Python, "device": c.Device, "size": c.Size,
					"work_dir": c.WorkDir, "cache_dir": c.CacheDir, "compile_workers": c.CompileWorkers, "contract": c.Contract,
				})
			}
			file := c.ConfigFile
			if file == "" {
				file = "(none found)"
			}
			fmt.Fprintf(a.out, "config file      %s\n", file)
			fmt.Fprintf(a.out, "db               %s\n", c.DB)
			fmt.Fprintf(a.out, "python           %s\n", orDefault(c.Python, "(auto: first interpreter that imports torch)"))
			fmt.Fprintf(a.out, "device           %s\n", c.Device)
			fmt.Fprintf(a.out, "size             %s\n", c.Size)
			fmt.Fprintf(a.out, "work_dir         %s\n", c.WorkDir)
			fmt.Fprintf(a.out, "cache_dir        %s\n", c.CacheDir)
			fmt.Fprintf(a.out, "compile_workers  %d\n", c.CompileWorkers)
			k := c.Contract
			fmt.Fprintf(a.out, "contract         seeds %d, timed_calls %d, warmup %d, check_calls %d, cpu_threads %d, flush %v, poison %v\n",
				k.Seeds, k.TimedCalls, k.Warmup, k.CheckCalls, k.CPUThreads, k.FlushCache, k.Poison)
			fmt.Fprintf(a.out, "timeouts         evaluation %s, call %s, compile %s\n", k.Timeout, k.CallTimeout, k.CompileTimeout)
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
