package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kbplatform/kbplatform/internal/export"
	"github.com/kbplatform/kbplatform/internal/report"
)

// studyExportCmd writes every attempt of a study for analysis elsewhere.
func (a *app) studyExportCmd() *cobra.Command {
	var format, out string
	cmd := &cobra.Command{
		Use:   "export ID --format jsonl|csv|parquet [--out FILE]",
		Short: "Write every attempt of a study as JSON lines, CSV or Parquet",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(export.Formats, format) {
				return fmt.Errorf("unknown format %q (known: %s)", format, strings.Join(export.Formats, ", "))
			}
			st, err := a.readStore()
			if err != nil {
				return err
			}
			defer st.Close()
			s, err := report.Load(st, args[0], report.LoadOptions{})
			if err != nil {
				return err
			}
			rows := export.Rows(s)
			if out == "" || out == "-" {
				return export.Write(a.out, format, rows)
			}
			if err := export.WriteFile(out, format, rows); err != nil {
				return err
			}
			a.progress("wrote %d attempts of study %s to %s", len(rows), s.ID, out)
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "jsonl", "jsonl, csv or parquet")
	cmd.Flags().StringVarP(&out, "out", "o", "", "file to write (default: standard output)")
	return cmd
}
