// Package feedback writes what a refining strategy tells the model about its earlier kernels: the
// code (G), the contract's verdict with how and where it was wrong (E), and the profiler's
// breakdown of a correct kernel (P), in one of three formats (raw code, an ast-structured diff
// against the turn before, or best-so-far against the latest failure).
//
// It lives in the SDK, not beside the built-in strategies, so that a third-party strategy can feed
// back exactly what refine and backtrack do: a comparison of search policies is only fair when
// the feedback they give is the same text.
//
// The text is deterministic (the same kernels and results give the same bytes) and bounded
// (long logs, sources and diffs are cut with a note that says so).
package feedback

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/kbplatform/kbplatform/sdk"
)

// Parts says what the feedback carries.
type Parts string

// The parts refinement can feed back.
const (
	G   Parts = "G"     // the previous code
	GE  Parts = "G+E"   // and its compile, runtime or correctness result
	GEP Parts = "G+E+P" // and the profile of a correct kernel, with its speedup
)

// PartsList lists the parts settings in the order they are documented.
func PartsList() []Parts { return []Parts{G, GE, GEP} }

// Errors reports whether the parts include E.
func (p Parts) Errors() bool { return p == GE || p == GEP }

// Profiles reports whether the parts include P.
func (p Parts) Profiles() bool { return p == GEP }

// Format is how the code is shown.
type Format string

// The feedback formats.
const (
	// None is the first prompt's: no feedback.
	None Format = "none"
	// Raw shows the previous kernel's complete source.
	Raw Format = "raw"
	// ASTDiff shows what the previous kernel changed against the kernel it was refined from, by
	// top-level definition (Python's ast), kernel-source strings diffed as text. The complete
	// previous kernel reaches the model as its own earlier reply (History).
	ASTDiff Format = "ast-diff"
	// Contrastive shows the best kernel so far beside the latest one that did worse, and what
	// differs between them.
	Contrastive Format = "contrastive"
)

// Formats lists the formats a setting may name, in the order they are documented.
func Formats() []Format { return []Format{Raw, ASTDiff, Contrastive} }

// ParseParts checks a parts setting ("" is G+E).
func ParseParts(s string) (Parts, error) {
	if s == "" {
		return GE, nil
	}
	if !slices.Contains(PartsList(), Parts(s)) {
		return "", fmt.Errorf("%w: feedback %q (known: G, G+E, G+E+P)", sdk.ErrInvalidConfig, s)
	}
	return Parts(s), nil
}

// ParseFormat checks a format setting ("" is raw).
func ParseFormat(s string) (Format, error) {
	if s == "" {
		return Raw, nil
	}
	if !slices.Contains(Formats(), Format(s)) {
		return "", fmt.Errorf("%w: format %q (known: raw, ast-diff, contrastive)", sdk.ErrInvalidConfig, s)
	}
	return Format(s), nil
}

// Limits bound the feedback's pieces, in bytes.
const (
	MaxSource  = 32 << 10 // one kernel's source
	MaxLog     = 4 << 10  // a compile log, a traceback, a message
	MaxDiff    = 12 << 10 // a structured or text diff
	MaxReply   = 2 << 10  // a reply without code, quoted
	maxKernels = 8        // profile rows
)

// Kernel is one earlier attempt as the feedback sees it.
type Kernel struct {
	Turn   int
	Source string // "" when the reply had no code
	// Reply is the model's reply, quoted when it held no code.
	Reply string
	// NoCode says why no code was found (the extraction error), when Source is "".
	NoCode string
	// Result is the kernel's evaluation; nil when it was not evaluated.
	Result *sdk.Result
	// Note says why an extracted kernel was not evaluated (the budget ran out, say).
	Note string
}

// Request is what one piece of feedback is about.
type Request struct {
	// Latest is the kernel the feedback is about: the last turn's (or, when backtracking, the
	// best so far the search returns to).
	Latest *Kernel
	// Before is the kernel Latest was refined from (for ast-diff); nil on the first refinement.
	Before *Kernel
	// Best is the best kernel so far (for contrastive); Latest itself when it is the best.
	Best *Kernel
	// Regressed, when set, is a worse kernel the search just left behind (backtracking): the
	// feedback names it and its outcome so the model does not repeat it.
	Regressed *Kernel
}

// Builder writes feedback.
type Builder struct {
	Parts  Parts
	Format Format
	// Differ computes ast-diff's structured diffs.
	Differ Differ
}

// Build returns the feedback text and the kind to record with the attempt ("raw G+E", say).
func (b Builder) Build(ctx context.Context, req Request) (string, string) {
	if req.Latest == nil {
		return "", string(None)
	}
	var w strings.Builder
	format := b.Format
	if format == "" {
		format = Raw
	}
	if req.Regressed != nil {
		fmt.Fprintf(&w, "Your attempt of turn %d did worse than your best so far (%s), so we go back to the best kernel (turn %d).\n\n",
			req.Regressed.Turn, Headline(req.Regressed), req.Latest.Turn)
	}
	switch format {
	case ASTDiff:
		b.astDiff(ctx, &w, req)
	case Contrastive:
		b.contrastive(ctx, &w, req)
	default:
		fmt.Fprintf(&w, "## Your kernel of turn %d\n\n", req.Latest.Turn)
		b.kernel(&w, req.Latest)
	}
	w.WriteString(closing(format, req, b.partsOrDefault()))
	return strings.TrimSpace(w.String()), string(format) + " " + string(b.partsOrDefault())
}

func (b Builder) partsOrDefault() Parts {
	if b.Parts == "" {
		return GE
	}
	return b.Parts
}

// kernel writes G, E and P of one kernel, as the parts say.
func (b Builder) kernel(w *strings.Builder, k *Kernel) {
	w.WriteString(Code(k))
	b.results(w, k)
}

// results writes E and P of one kernel, as the parts say.
func (b Builder) results(w *strings.Builder, k *Kernel) {
	parts := b.partsOrDefault()
	if parts.Errors() {
		w.WriteString("\n### What the evaluation found\n\n")
		w.WriteString(Outcome(k))
	}
	if parts.Profiles() {
		w.WriteString("\n### Profile\n\n")
		w.WriteString(Profile(k.Result))
	}
}

func (b Builder) astDiff(ctx context.Context, w *strings.Builder, req Request) {
	k := req.Latest
	fmt.Fprintf(w, "## Your kernel of turn %d\n\n", k.Turn)
	switch {
	case k.Source == "":
		w.WriteString(Code(k))
	case req.Before == nil || req.Before.Source == "":
		w.WriteString("Its complete source is your reply above; there is no earlier kernel to compare it with.\n")
	default:
		fmt.Fprintf(w, "Its complete source is your reply above. What it changed against your kernel of turn %d (%s):\n\n",
			req.Before.Turn, Headline(req.Before))
		w.WriteString(b.Differ.Diff(ctx, req.Before.Source, k.Source))
	}
	b.results(w, k)
}

func (b Builder) contrastive(ctx context.Context, w *strings.Builder, req Request) {
	best, latest := req.Best, req.Latest
	if best == nil || best == latest {
		fmt.Fprintf(w, "## Your best kernel so far (turn %d), which is also your latest\n\n", latest.Turn)
		b.kernel(w, latest)
		return
	}
	fmt.Fprintf(w, "## Your best kernel so far (turn %d)\n\n", best.Turn)
	b.kernel(w, best)
	fmt.Fprintf(w, "\n## Your latest kernel (turn %d), which did worse\n\n", latest.Turn)
	if latest.Source == "" {
		w.WriteString(Code(latest))
	} else {
		fmt.Fprintf(w, "How it differs from the best one:\n\n")
		w.WriteString(b.Differ.Diff(ctx, best.Source, latest.Source))
	}
	b.results(w, latest)
}

// closing says what to do next.
func closing(format Format, req Request, parts Parts) string {
	k := req.Latest
	switch {
	case format == Contrastive && req.Best != nil && req.Best != k:
		return "\nStart from your best kernel, avoid what made the latest one worse, and give the complete new file.\n"
	case k.Result != nil && k.Result.Verdict == sdk.Pass:
		return "\nThe kernel is correct. Make it faster, keeping it correct, and give the complete new file.\n"
	case parts.Errors():
		return "\nFix the problems above and give the complete corrected file.\n"
	default:
		return "\nImprove this kernel and give the complete new file.\n"
	}
}

// Code writes a kernel's source (G), or says that its reply had none.
func Code(k *Kernel) string {
	if k.Source == "" {
		var w strings.Builder
		w.WriteString("Your reply contained no usable code")
		if k.NoCode != "" {
			fmt.Fprintf(&w, " (%s)", k.NoCode)
		}
		w.WriteString(". It began:\n\n")
		w.WriteString(fence("text", Cut(k.Reply, MaxReply, "reply")))
		return w.String()
	}
	return fence("python", Cut(k.Source, MaxSource, "source"))
}

// fence puts text in a code block whose fence the text cannot close.
func fence(lang, text string) string {
	f := "```"
	for strings.Contains(text, f) {
		f += "`"
	}
	return f + lang + "\n" + strings.TrimRight(text, "\n") + "\n" + f + "\n"
}

// Cut bounds text to max bytes (on a rune boundary), keeping its head and tail and saying how
// much was left out.
func Cut(text string, max int, what string) string {
	if len(text) <= max {
		return text
	}
	head, tail := max*2/3, max/3
	for head > 0 && !utf8Start(text[head]) {
		head--
	}
	start := len(text) - tail
	for start < len(text) && !utf8Start(text[start]) {
		start++
	}
	return fmt.Sprintf("%s\n[... %d bytes of the %s left out ...]\n%s", text[:head], start-head, what, text[start:])
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
