package search

import (
	"fmt"

	"github.com/kbplatform/kbplatform/sdk"
	"github.com/kbplatform/kbplatform/sdk/feedback"
)

// Candidate is one recorded attempt: what was asked, what came back and what the contract said.
type Candidate struct {
	Step, Turn, Sample int
	Parent             int // the step the feedback came from; -1: none
	Prompt             []sdk.Message
	Feedback           string
	FeedbackKind       string
	Temperature        float64
	Reply              string
	Source             string // "" when the reply had no code
	NoCode             string // the extraction error, when Source is ""
	Eval               *sdk.Evaluation
	Note               string // why an extracted kernel was not evaluated
}

// Result is the candidate's evaluation result, nil when it was not evaluated.
func (c *Candidate) Result() *sdk.Result {
	if c == nil || c.Eval == nil {
		return nil
	}
	return c.Eval.Result
}

// Passed reports whether the contract passed the candidate.
func (c *Candidate) Passed() bool {
	r := c.Result()
	return r != nil && r.Verdict == sdk.Pass
}

// Kernel is the candidate as feedback sees it (nil for nil).
func (c *Candidate) Kernel() *feedback.Kernel {
	if c == nil {
		return nil
	}
	return &feedback.Kernel{Turn: c.Turn, Source: c.Source, Reply: c.Reply, NoCode: c.NoCode, Result: c.Result(), Note: c.Note}
}

// attempt is the candidate as the store keeps it.
func (c *Candidate) attempt() sdk.Attempt {
	a := sdk.Attempt{Step: c.Step, ParentStep: c.Parent, Completion: c.Reply, FeedbackKind: c.FeedbackKind,
		Turn: c.Turn, Sample: c.Sample, Feedback: c.Feedback, Prompt: c.Prompt, Temperature: c.Temperature}
	if a.FeedbackKind == "" {
		a.FeedbackKind = "none"
	}
	switch {
	case c.Eval != nil:
		a.EvaluationID = c.Eval.ID
		a.KernelHash = c.Eval.Result.Kernel.Hash
		a.Note = c.Eval.Result.Verdict
		if cl := c.Eval.Result.ErrorClass; cl != "" {
			a.Note += " " + cl
		}
		if t := c.Eval.Result.Timing; t != nil && c.Eval.Result.Verdict == sdk.Pass {
			a.Note += fmt.Sprintf(" %.3gx", t.Speedup)
		}
	case c.Source == "" && c.Reply != "":
		a.Note, a.Failure = c.NoCode, sdk.FailureNoCode
	default:
		a.Note = c.Note
	}
	return a
}
