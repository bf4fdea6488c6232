package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kbplatform/kbplatform/internal/plugins"
	"github.com/kbplatform/kbplatform/internal/queue"
	"github.com/kbplatform/kbplatform/plugins/targets/cluster"
)

// The cluster settings (kbplatform.yaml `cluster:`); credentials are settings, never flags.
func clusterDefaults() map[string]any {
	return map[string]any{
		"cluster.url":         "",
		"cluster.listen":      "127.0.0.1:0",
		"cluster.gpu_kinds":   []string{},
		"cluster.user":        "",
		"cluster.password":    "",
		"cluster.nkey_file":   "",
		"cluster.ack_wait":    queue.DefaultConsumerOptions.AckWait,
		"cluster.max_deliver": queue.DefaultConsumerOptions.MaxDeliver,
	}
}

func (a *app) clusterAuth() queue.Auth {
	return queue.Auth{User: a.v.GetString("cluster.user"), Password: a.v.GetString("cluster.password"), NkeyFile: a.v.GetString("cluster.nkey_file")}
}

// jetstreamDir keeps the embedded server's files beside the database, not inside it (Badger
// owns that folder).
func (a *app) jetstreamDir() string {
	return strings.TrimRight(a.cfg.DB, string(os.PathSeparator)) + ".jetstream"
}

// clusterURL is the configured server, else an embedded one: another kbplatform command's that
// still answers, or one started in this process for as long as the command runs.
func (a *app) clusterURL() (string, error) {
	if u := a.v.GetString("cluster.url"); u != "" {
		return u, nil
	}
	if a.embedded != nil {
		return a.embedded.URL(), nil
	}
	if b, err := os.ReadFile(queue.URLFile(a.jetstreamDir())); err == nil {
		u := strings.TrimSpace(string(b))
		ctx, cancel := context.WithTimeout(a.ctx, 2*time.Second)
		c, err := queue.DialOnce(ctx, u, "kbplatform probe", a.clusterAuth())
		cancel()
		if err == nil {
			c.Close()
			a.progress("cluster: using the JetStream server another kbplatform command runs at %s", u)
			return u, nil
		}
	}
	e, err := queue.StartEmbedded(queue.EmbeddedOptions{Listen: a.v.GetString("cluster.listen"), StoreDir: a.jetstreamDir(), Auth: a.clusterAuth()})
	if err != nil {
		return "", err
	}
	a.embedded = e
	a.atExit = append(a.atExit, e.Close)
	a.progress("cluster: embedded JetStream server at %s (files in %s); start workers with `kbplatform worker`", e.URL(), a.jetstreamDir())
	return e.URL(), nil
}

// targetSettings is a target's configuration: what the study or user gave, else (for the local
// target) what the host's settings say. For target/cluster the connection (the server's URL, an
// embedded server's included, and the credentials) and cluster.gpu_kinds reach the plugin
// through its environment (KBP_CLUSTER_*), not its configuration: a study's configuration is
// part of its identity and is stored, and neither a port nor a password belongs there.
func (a *app) targetSettings(ref string, given json.RawMessage) (json.RawMessage, error) {
	switch ref {
	case "target/local":
		if given == nil {
			return a.targetConfig(), nil
		}
	case "target/cluster":
		u, err := a.clusterURL()
		if err != nil {
			return nil, err
		}
		auth := a.clusterAuth()
		kinds := a.v.GetStringSlice("cluster.gpu_kinds")
		// The kind --device names is wanted too, workers of it connected yet or not.
		if k, err := queue.KindOf(a.cfg.Device); err == nil && a.cfg.Device != "auto" && !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
		for k, v := range map[string]string{cluster.EnvURL: u, cluster.EnvUser: auth.User, cluster.EnvPassword: auth.Password,
			cluster.EnvNkeyFile: auth.NkeyFile, cluster.EnvGPUKinds: strings.Join(kinds, ",")} {
			if err := os.Setenv(k, v); err != nil {
				return nil, err
			}
		}
	}
	return given, nil
}

func (a *app) targetCmd() *cobra.Command {
	cmd := groupCmd("target", "Show what a target offers")
	var asJSON bool
	describe := &cobra.Command{
		Use:   "describe",
		Short: "Start the configured target (--target) and show its devices; for cluster, its GPU kinds, workers and jobs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pm := a.pluginManager()
			defer pm.Close()
			inst, hw, err := a.target(pm)
			if err != nil {
				return err
			}
			defer inst.Close()
			if asJSON {
				return printJSON(a.out, hw)
			}
			tw := tabwriter.NewWriter(a.out, 0, 0, 2, ' ', 0)
			fmt.Fprintf(tw, "target\t%s\n", hw.Target)
			for _, d := range hw.Devices {
				fmt.Fprintf(tw, "device\t%s\t%s\t%s\n", d.Name, d.Kind, d.Model)
			}
			fmt.Fprintf(tw, "capabilities\t%s\n", strings.Join(hw.Capabilities, ", "))
			tw.Flush()
			renderClusterStatus(a, hw.Fingerprint["cluster"])
			return nil
		},
	}
	describe.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	describe.Flags().String("target", "", "target plugin (default: the configured one, local)")
	cmd.AddCommand(describe)
	return cmd
}

// renderClusterStatus prints the cluster target's kinds and workers, when hw has them.
func renderClusterStatus(a *app, v any) {
	if v == nil {
		return
	}
	var st cluster.Status
	b, _ := json.Marshal(v)
	if json.Unmarshal(b, &st) != nil {
		return
	}
	tw := tabwriter.NewWriter(a.out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(a.out, "\nserver %s\n", st.URL)
	fmt.Fprintln(tw, "KIND\tWORKERS\tQUEUED\tRUNNING\tDONE")
	for _, k := range st.Kinds {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\n", k.Kind, k.Workers, k.Queued, k.Running, k.Done)
	}
	tw.Flush()
	if len(st.Workers) == 0 {
		fmt.Fprintln(a.out, "no worker connected (start one per GPU: kbplatform worker; docs/cluster.md)")
		return
	}
	fmt.Fprintln(a.out)
	fmt.Fprintln(tw, "WORKER\tKIND\tHOST\tDEVICE\tMODEL\tBUSY\tDONE\tSINCE")
	for _, w := range st.Workers {
		busy := w.Busy
		if busy == "" {
			busy = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", w.ID, w.Kind, w.Host, w.Device, w.Model, busy, w.Done, w.Started.Format(time.RFC3339))
	}
	tw.Flush()
}

// inspectTarget adds what a target reports once configured: its devices and, for the cluster
// target, the GPU kinds and workers connected now.
func (a *app) inspectTarget(m *plugins.Manager, ref string) {
	cfg, err := a.targetSettings(ref, nil)
	if err != nil {
		fmt.Fprintf(a.out, "devices       (not configured: %v)\n", err)
		return
	}
	inst, err := m.Start(a.ctx, ref, cfg, nil)
	if err != nil {
		fmt.Fprintf(a.out, "devices       (does not start: %v)\n", err)
		return
	}
	defer inst.Close()
	hw, err := inst.Target().Describe(a.ctx)
	if err != nil {
		fmt.Fprintf(a.out, "devices       (describe: %v)\n", err)
		return
	}
	for _, d := range hw.Devices {
		fmt.Fprintf(a.out, "device        %s (%s) %s\n", d.Name, d.Kind, d.Model)
	}
	renderClusterStatus(a, hw.Fingerprint["cluster"])
}
