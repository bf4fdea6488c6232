package cli

import (
	"encoding/json"
	"fmt"

	"github.com/kbplatform/kbplatform/internal/store"
	"github.com/kbplatform/kbplatform/internal/study"
)

// trajectoryStep is one attempt of `study show ID --task T`, with the verdict of its evaluation.
type trajectoryStep struct {
	store.AttemptRecord
	ArmLabel    string  `json:"arm_label,omitempty"`
	PromptChars int     `json:"prompt_chars"`
	Verdict     string  `json:"verdict,omitempty"`
	ErrorClass  string  `json:"error_class,omitempty"`
	Speedup     float64 `json:"speedup,omitempty"`
}

// showTrajectory prints one task's trajectory in a study: each attempt of each arm in order,
// with its turn and sample, parent, feedback, prompt size, reply, kernel and verdict, so that any
// number of a report can be traced to the attempts behind it.
func (a *app) showTrajectory(st *store.Store, id, task string, asJSON bool) error {
	s, err := st.Study(id)
	if err != nil {
		return err
	}
	var spec study.Spec
	if err := json.Unmarshal(s.Spec, &spec); err != nil {
		return fmt.Errorf("study %s: stored spec: %w", s.ID, err)
	}
	known := false
	for _, t := range spec.Tasks {
		known = known || t == task
	}
	if !known {
		return fmt.Errorf("study %s has no task %q (its tasks: %d, see `study show %s`)", s.ID[:12], task, len(spec.Tasks), s.ID[:12])
	}
	atts, err := st.Attempts(s.ID, task)
	if err != nil {
		return err
	}
	labels := map[string]string{}
	order := map[string]int{}
	armLabels := spec.ArmLabels()
	for i, arm := range spec.Arms() {
		labels[arm.Key()] = armLabels[i]
		order[arm.Key()] = i
	}
	steps := make([]trajectoryStep, 0, len(atts))
	for _, at := range atts {
		ts := trajectoryStep{AttemptRecord: at, ArmLabel: labels[at.Arm]}
		for _, m := range at.Prompt {
			ts.PromptChars += len(m.Content)
		}
		if at.EvaluationID != "" {
			if ev, err := st.Evaluation(at.EvaluationID); err == nil && ev.Result != nil {
				ts.Verdict, ts.ErrorClass = ev.Result.Verdict, ev.Result.ErrorClass
				if ev.Result.Timing != nil {
					ts.Speedup = ev.Result.Timing.Speedup
				}
			}
		}
		steps = append(steps, ts)
	}
	// By arm in the study's order, each arm's attempts in the order they were made.
	for i := 1; i < len(steps); i++ {
		for j := i; j > 0 && order[steps[j].Arm] < order[steps[j-1].Arm]; j-- {
			steps[j], steps[j-1] = steps[j-1], steps[j]
		}
	}
	if asJSON {
		return printJSON(a.out, steps)
	}
	fmt.Fprintf(a.out, "study %s, task %s: %d attempts\n", s.ID, task, len(steps))
	arm := "\x00"
	for _, ts := range steps {
		if ts.Arm != arm {
			arm = ts.Arm
			l := ts.ArmLabel
			if l == "" {
				l = ts.Model + " · " + ts.Backend + " · " + ts.Strategy + " · " + ts.Target
			}
			fmt.Fprintf(a.out, "\narm %s\n", l)
		}
		parent := "-"
		if ts.ParentStep >= 0 {
			parent = fmt.Sprint(ts.ParentStep)
		}
		fmt.Fprintf(a.out, "  step %d  turn %d  sample %d  parent %s  %s\n", ts.Step, ts.Turn, ts.Sample, parent, ts.At.Format("15:04:05"))
		switch {
		case ts.Feedback != "":
			fmt.Fprintf(a.out, "    feedback (%s): %s\n", orDash(ts.FeedbackKind), bounded(ts.Feedback, 200))
		case ts.FeedbackKind != "":
			fmt.Fprintf(a.out, "    feedback: %s\n", ts.FeedbackKind)
		}
		fmt.Fprintf(a.out, "    prompt: %d messages, %d characters; tokens %d in / %d out\n", len(ts.Prompt), ts.PromptChars, ts.PromptTokens, ts.CompletionTokens)
		if ts.Failure != "" {
			fmt.Fprintf(a.out, "    generation failed: %s\n", ts.Failure)
		}
		if ts.Completion != "" {
			fmt.Fprintf(a.out, "    reply: %s\n", bounded(ts.Completion, 160))
		}
		kernel, eval := "-", "-"
		if len(ts.KernelHash) >= 12 {
			kernel = ts.KernelHash[:12]
		}
		if len(ts.EvaluationID) >= 12 {
			eval = ts.EvaluationID[:12]
		}
		verdict := orDash(ts.Verdict)
		if ts.ErrorClass != "" {
			verdict += " " + ts.ErrorClass
		}
		if ts.Speedup > 0 {
			verdict += fmt.Sprintf(" %.2fx", ts.Speedup)
		}
		fmt.Fprintf(a.out, "    kernel %s  evaluation %s  %s\n", kernel, eval, verdict)
		if ts.Note != "" {
			fmt.Fprintf(a.out, "    note: %s\n", bounded(ts.Note, 160))
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
