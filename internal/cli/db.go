package cli

import (
	"fmt"
	"os"
	"sort"

	"github.com/spf13/cobra"

	"github.com/kbplatform/kbplatform/internal/store"
)

// recordNames are the key prefixes of docs/store-api.md, as db check prints them.
var recordNames = map[string]string{
	"t/": "tasks", "k/": "kernels", "e/": "evaluations", "b/": "baselines", "s/": "studies",
	"sr/": "study runs", "su/": "finished study tasks", "sa/": "study attempts", "ix/": "index entries",
	"mc/": "model calls", "mcache/": "cached model replies",
}

func (a *app) dbCmd() *cobra.Command {
	cmd := groupCmd("db", "Check, back up and restore the database")
	cmd.AddCommand(a.dbCheckCmd(), a.dbBackupCmd(), a.dbRestoreCmd())
	return cmd
}

func (a *app) dbCheckCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Report the database's health: every table and record read, damaged files named; changes nothing",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := store.Check(a.cfg.DB)
			if err != nil {
				return err
			}
			if asJSON {
				if err := printJSON(a.out, h); err != nil {
					return err
				}
			} else {
				a.printHealth(h)
			}
			if !h.OK() {
				return fmt.Errorf("%w: %d damaged file(s) in %s. Nothing was changed. Restore the database from a backup (kbplatform db restore FILE --db NEW-FOLDER, or put the folder back)", store.ErrDamaged, len(h.Damaged), h.Dir)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (a *app) printHealth(h *store.Health) {
	if !h.Exists {
		fmt.Fprintf(a.out, "%s: no database yet (nothing stored)\n", h.Dir)
		return
	}
	fmt.Fprintf(a.out, "database  %s\n", h.Dir)
	if h.Holder != nil {
		fmt.Fprintf(a.out, "held by   kbplatform process %d (%s) since %s: counted through it, its files not read while it runs\n",
			h.Holder.PID, h.Holder.Command, h.Holder.Since.Format("2006-01-02 15:04:05"))
	} else {
		fmt.Fprintf(a.out, "files     %d tables, %.1f MB\n", h.Tables, float64(h.Bytes)/1e6)
	}
	var prefixes []string
	total := 0
	for p, n := range h.Records {
		prefixes = append(prefixes, p)
		total += n
	}
	sort.Strings(prefixes)
	for _, p := range prefixes {
		name := recordNames[p]
		if name == "" {
			name = p
		}
		fmt.Fprintf(a.out, "  %8d  %s\n", h.Records[p], name)
	}
	if len(h.Damaged) == 0 {
		fmt.Fprintf(a.out, "ok        %d records, every table and record readable\n", total)
		return
	}
	fmt.Fprintf(a.out, "DAMAGED   %d file(s):\n", len(h.Damaged))
	for _, d := range h.Damaged {
		fmt.Fprintf(a.out, "  %s\n", d)
	}
}

func (a *app) dbBackupCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "backup FILE",
		Short: "Write every record to FILE (Badger's backup format); works while another command holds the database",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := a.readStore()
			if err != nil {
				return err
			}
			defer st.Close()
			n, err := st.BackupFile(args[0])
			if err != nil {
				return fmt.Errorf("backup to %s: %w (no file was written under that name)", args[0], err)
			}
			fmt.Fprintf(a.out, "backed up %s to %s (%d bytes)\n", st.Dir(), args[0], n)
			return nil
		},
	}
}

func (a *app) dbRestoreCmd() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "restore FILE [--force]",
		Short: "Load a backup into the database; refuses one that holds records unless --force (which backs them up first)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			size := int64(-1)
			if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
				size = st.Size()
			}
			rep, err := store.Restore(a.cfg.DB, f, size, force)
			if rep.SavedTo != "" {
				fmt.Fprintf(a.out, "the %d records %s held were backed up to %s\n", rep.Replaced, a.cfg.DB, rep.SavedTo)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(a.out, "restored %s into %s: %d records\n", args[0], a.cfg.DB, rep.Loaded)
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "replace the records the database holds (they are backed up beside it first)")
	return cmd
}
