package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/kbplatform/kbplatform/internal/store"
	"github.com/kbplatform/kbplatform/internal/study"
)

// staleAfter is how long a running state may go without a heartbeat (every 5 s) before the run
// is taken for dead: a process killed with -9 says nothing.
const staleAfter = 30 * time.Second

// runState is the state of a study's latest run as it stands now: a running state whose process
// is gone, or whose heartbeat stopped, reads "stopped".
func runState(r *store.StudyRun) string {
	if r.State != "running" {
		return r.State
	}
	if time.Since(r.Updated) > staleAfter {
		return "stopped"
	}
	if host, _ := os.Hostname(); host == r.Host && !processAlive(r.PID) {
		return "stopped"
	}
	return "running"
}

func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// studyStatus is `study status --json`.
type studyStatus struct {
	Study   string          `json:"study"`
	Name    string          `json:"name,omitempty"`
	State   string          `json:"state"` // running, finished, stopped, budget, never run
	Run     *store.StudyRun `json:"run,omitempty"`
	Total   int             `json:"total"`
	Done    int             `json:"done"`
	Arms    []armStatus     `json:"arms"`
	Message string          `json:"message,omitempty"`
}

type armStatus struct {
	Arm      string `json:"arm"` // label ("" in a study of one arm)
	Key      string `json:"key"`
	Done     int    `json:"done"`
	Total    int    `json:"total"`
	Attempts int    `json:"attempts"`
}

func (a *app) studyStatusCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status ID",
		Short: "Show where a study stands: running or stopped, units done per arm, what runs now, ETA (works while it runs)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := a.readStore()
			if err != nil {
				return err
			}
			defer st.Close()
			s, err := st.Study(args[0])
			if err != nil {
				return err
			}
			var spec study.Spec
			if err := json.Unmarshal(s.Spec, &spec); err != nil {
				return fmt.Errorf("study %s: stored spec: %w", s.ID, err)
			}
			units, err := st.Units(s.ID)
			if err != nil {
				return err
			}
			atts, err := st.Attempts(s.ID, "")
			if err != nil {
				return err
			}
			out := studyStatus{Study: s.ID, Name: s.Name, State: "never run", Total: len(spec.Tasks) * len(spec.Arms())}
			done := map[string]bool{}
			for _, u := range units {
				done[u.Task] = true
			}
			byArm := map[string]int{}
			for _, at := range atts {
				byArm[at.Arm]++
			}
			labels := spec.ArmLabels()
			for i, arm := range spec.Arms() {
				as := armStatus{Arm: labels[i], Key: arm.Key(), Total: len(spec.Tasks), Attempts: byArm[arm.Key()]}
				for _, t := range spec.Tasks {
					if done[spec.UnitKey(arm, t)] {
						as.Done++
					}
				}
				out.Done += as.Done
				out.Arms = append(out.Arms, as)
			}
			if r, err := st.LastStudyRun(s.ID); err == nil {
				out.Run, out.State = r, runState(r)
				out.Message = r.Reason
				if out.State == "stopped" && r.State == "running" {
					out.Message = fmt.Sprintf("its process (pid %d) stopped without finishing; run the study again to resume it", r.PID)
				}
			} else if !errors.Is(err, store.ErrNotFound) {
				return err
			} else if out.Done > 0 {
				// Run by a kbplatform that did not record its runs' state: what is stored says
				// only how far it got.
				out.State = "stopped"
				if out.Done == out.Total {
					out.State = "finished"
				}
			}
			if asJSON {
				return printJSON(a.out, out)
			}
			fmt.Fprintf(a.out, "study %s %s: %s, %d/%d units done\n", s.ID, s.Name, out.State, out.Done, out.Total)
			if r := out.Run; r != nil {
				last := "updated"
				if out.State != "running" {
					last = "last heard of"
				}
				fmt.Fprintf(a.out, "last run: pid %d on %s, started %s (UTC), %s %s ago\n", r.PID, r.Host, r.Started.Format("2006-01-02 15:04:05"),
					last, time.Since(r.Updated).Round(time.Second))
				if out.State == "running" {
					fmt.Fprintf(a.out, "running: %d, failed: %d", len(r.Running), r.Failed)
					if r.ETASeconds > 0 {
						fmt.Fprintf(a.out, ", ETA %s", (time.Duration(r.ETASeconds) * time.Second).Round(time.Second))
					}
					fmt.Fprintln(a.out)
					for _, u := range r.Running {
						fmt.Fprintln(a.out, "  "+u)
					}
				}
			}
			if out.Message != "" {
				fmt.Fprintln(a.out, out.Message)
			}
			if len(out.Arms) > 1 {
				for _, as := range out.Arms {
					fmt.Fprintf(a.out, "  %-40s %d/%d units, %d attempts\n", as.Arm, as.Done, as.Total, as.Attempts)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// bounded cuts text to n runes on one line, saying how much was left out.
func bounded(text string, n int) string {
	t := strings.Join(strings.Fields(text), " ")
	r := []rune(t)
	if len(r) <= n {
		return t
	}
	return string(r[:n]) + "… (" + strconv.Itoa(len(r)-n) + " more characters)"
}
