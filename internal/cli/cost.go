package cli

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/kbplatform/kbplatform/internal/gateway"
	"github.com/kbplatform/kbplatform/internal/store"
)

// resultsCostCmd sums model calls: tokens and cost per study, model and strategy.
func (a *app) resultsCostCmd() *cobra.Command {
	var studyID string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "cost [--study ID]",
		Short: "Model calls, tokens and cost per study, model and strategy (prices: kbplatform.yaml)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.readStore()
			if err != nil {
				return err
			}
			defer st.Close()
			var studies []store.Study
			if studyID != "" {
				s, err := st.Study(studyID)
				if err != nil {
					return err
				}
				studies = []store.Study{*s}
			} else if studies, err = st.Studies(); err != nil {
				return err
			}
			type studyCost struct {
				Study string             `json:"study"`
				Name  string             `json:"name,omitempty"`
				Lines []gateway.CostLine `json:"lines"`
			}
			var out []studyCost
			for _, s := range studies {
				calls, err := st.Calls(s.ID)
				if err != nil {
					return err
				}
				if len(calls) > 0 {
					out = append(out, studyCost{Study: s.ID, Name: s.Name, Lines: gateway.Costs(calls)})
				}
			}
			if asJSON {
				return printJSON(a.out, out)
			}
			if len(out) == 0 {
				fmt.Fprintln(a.out, "no model calls recorded")
			}
			for _, sc := range out {
				fmt.Fprintf(a.out, "study %s %s\n", sc.Study, sc.Name)
				renderCosts(a.out, sc.Lines)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&studyID, "study", "", "one study (id or prefix)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func renderCosts(w io.Writer, lines []gateway.CostLine) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tSTRATEGY\tCALLS\tCACHED\tFAILED\tPROMPT TOKENS\tCOMPLETION TOKENS\tREASONING\tCOST (USD)")
	for _, l := range lines {
		cost := fmt.Sprintf("%.6f", l.CostUSD)
		if l.Unpriced > 0 {
			cost += fmt.Sprintf(" (%d calls unpriced)", l.Unpriced)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", l.Model, l.Strategy, l.Calls, l.Cached, l.Failed, l.PromptTokens, l.CompletionTokens, l.ReasoningTokens, cost)
	}
	tw.Flush()
}
