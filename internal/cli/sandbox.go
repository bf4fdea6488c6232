package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kbplatform/kbplatform/internal/pyenv"
	"github.com/kbplatform/kbplatform/internal/sandbox"
)

func (a *app) sandboxCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "Show what confines kernels on this host, or run a command confined as a kernel is",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "status",
		Short: "Say which parts of the sandbox this host applies (Landlock, seccomp, network, task bound)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st := sandbox.Probe()
			fmt.Fprintf(a.out, "sandbox   %s\n", st)
			for _, m := range st.Missing {
				fmt.Fprintf(a.out, "missing   %s\n", m)
			}
			if len(st.Missing) == 0 {
				fmt.Fprintln(a.out, "complete  every part is in force: kernels run with an allowlisted environment, read-only system and Python, their own folders, no network")
			}
			return nil
		},
	})
	var ro, rw, without []string
	run := &cobra.Command{
		Use:   "run [--ro DIR]... [--rw DIR]... [--without LAYER]... -- COMMAND [ARG...]",
		Short: "Run a command in the sandbox a kernel's processes get (to see what a kernel can and cannot do)",
		Long: `Run a command confined as the contract's worker processes are: the environment allowlist,
read-only access to the system and the Python installation that imports torch, read-write access
to a fresh folder (its HOME and TMPDIR; --rw adds folders), the GPUs' device files, no network, the
system-call filter, no capabilities and bounded tasks; on a host with NVIDIA GPUs, what CUDA needs
besides (files by name in /dev/shm, its threads' names under /proc). Its exit status is the command's.

--without leaves a layer out (landlock, seccomp, capabilities, limits), to find which one a program
that fails confined trips over: a diagnosis, never a way to run kernels.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			home, err := os.MkdirTemp("", "kbp-sandbox-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(home)
			read := append([]string(nil), sandbox.SystemPaths...)
			if py, err := pyenv.Find(a.ctx, a.cfg.Python); err == nil {
				read = append(read, py.Paths...)
			}
			prog, err := exec.LookPath(args[0])
			if err != nil {
				return err
			}
			if abs, err := filepath.Abs(prog); err == nil {
				prog = abs
				read = append(read, filepath.Dir(abs))
			}
			p := sandbox.Policy{
				Env:       sandbox.Environ(os.Environ(), []string{"HOME=" + home, "TMPDIR=" + home}),
				ReadOnly:  append(read, ro...),
				ReadWrite: append([]string{home}, rw...),
				Devices:   sandbox.DeviceFiles(),
			}
			if slices.ContainsFunc(p.Devices, func(d string) bool { return strings.HasPrefix(d, "/dev/nvidia") }) {
				p.GrantGPU()
			}
			for _, w := range without {
				l, err := sandbox.ParseLayer(w)
				if err != nil {
					return err
				}
				p.Without = append(p.Without, l)
				fmt.Fprintf(a.errOut, "warning: without %s: this is not the sandbox kernels get\n", l)
			}
			c, err := sandbox.Command(p, prog, args[1:]...)
			if err != nil {
				return err
			}
			c.Dir = home
			c.Stdin, c.Stdout, c.Stderr = os.Stdin, a.out, a.errOut
			err = c.Run()
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return exitError{code: ee.ExitCode(), msg: fmt.Sprintf("%s exited with status %d", args[0], ee.ExitCode())}
			}
			return err
		},
	}
	run.Flags().StringArrayVar(&ro, "ro", nil, "also let the command read `DIR`")
	run.Flags().StringArrayVar(&rw, "rw", nil, "also let the command write in `DIR`")
	run.Flags().StringArrayVar(&without, "without", nil, "leave `LAYER` out (landlock, seccomp, capabilities, limits): to diagnose a program that fails confined")
	cmd.AddCommand(run)
	return cmd
}
