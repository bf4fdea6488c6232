package search

import (
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
