// Package extract finds the candidate file in a model's reply: the Python source that defines
// ModelNew. Replies are messy — several fenced blocks (kernel fragments in C++ or CUDA beside the
// Python file), language tags or none, prose around the code, a reasoning section before the
// answer, a reply cut off inside its last block — and every backend needs the same answer, so
// they all share this one reader.
package extract

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/kbplatform/kbplatform/sdk"
)

// Source returns the Python file that defines ModelNew. When several blocks do, the last one wins
// (models revise themselves). A reply without one is a generation failure: the error wraps
// sdk.ErrNoCode and says what the reply had instead.
func Source(reply string) (string, error) {
	text := strings.ReplaceAll(reply, "\r\n", "\n")
	answer, openReasoning := stripReasoning(text)
	blocks := fencedBlocks(answer)
	var best string
	python := 0
	for _, b := range blocks {
		if !isPythonTag(b.lang) {
			continue
		}
		python++
		if defines(b.body) {
			best = b.body
		}
	}
	if best != "" {
		return best, nil
	}
	if len(blocks) == 0 && defines(answer) {
		if src := bareFile(answer); src != "" {
			return src, nil
		}
	}
	switch {
	case openReasoning && strings.TrimSpace(answer) == "":
		return "", fmt.Errorf("%w: the reply ended inside its reasoning section (cut off?)", sdk.ErrNoCode)
	case len(blocks) == 0:
		return "", fmt.Errorf("%w: the reply has no code block", sdk.ErrNoCode)
	case python == 0:
		return "", fmt.Errorf("%w: the reply has %d code block(s) but no Python one", sdk.ErrNoCode, len(blocks))
	default:
		return "", fmt.Errorf("%w: no Python code block defines class ModelNew", sdk.ErrNoCode)
	}
}

var reModelNew = regexp.MustCompile(`(?m)^[ \t]*class[ \t]+ModelNew\b`)

func defines(src string) bool { return reModelNew.MatchString(src) }

// reasoning sections some models emit before their answer; matched case-insensitively.
var reasoningTags = []string{"think", "thinking", "reasoning", "thought"}

// stripReasoning removes reasoning sections. A closing tag without its opening one (some APIs drop
// the opening tag) ends a section that began at the start of the reply. An opening tag that never
// closes swallows the rest: the model never got to its answer. open reports that case.
func stripReasoning(text string) (answer string, open bool) {
	lower := strings.ToLower(text)
	for _, tag := range reasoningTags {
		start, end := "<"+tag+">", "</"+tag+">"
		for {
			i := strings.Index(lower, start)
			j := strings.Index(lower, end)
			switch {
			case i < 0 && j < 0:
			case j >= 0 && (i < 0 || j < i):
				text, lower = text[j+len(end):], lower[j+len(end):]
				continue
			case j < 0:
				return strings.TrimSpace(text[:i]), true
			default:
				text, lower = text[:i]+text[j+len(end):], lower[:i]+lower[j+len(end):]
				continue
			}
			break
		}
	}
	return text, false
}

type block struct {
	lang string
	body string
}

var reOpen = regexp.MustCompile("^[ \t]{0,3}(`{3,}|~{3,})[ \t]*([^`\\s]*)")

// fencedBlocks returns the fenced code blocks in order. A closing fence is the same character at
// least as long as the opening one; a block the reply never closes runs to the end.
func fencedBlocks(text string) []block {
	lines := strings.SplitAfter(text, "\n")
	var out []block
	for i := 0; i < len(lines); i++ {
		m := reOpen.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		fence, lang := m[1], strings.ToLower(m[2])
		var body strings.Builder
		j := i + 1
		for ; j < len(lines); j++ {
			t := strings.TrimSpace(lines[j])
			if strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == "" {
				break
			}
			body.WriteString(lines[j])
		}
		out = append(out, block{lang: lang, body: body.String()})
		i = j
	}
	return out
}

// isPythonTag accepts the tags models put on a Python file, and none.
func isPythonTag(lang string) bool {
	switch lang {
	case "", "python", "py", "python3", "py3", "pytorch":
		return true
	}
	return false
}

var (
	reCodeStart = regexp.MustCompile(`^(import |from |class |def |@|#)`)
	reCodeLine  = regexp.MustCompile(`^([ \t]|$|(import|from|class|def|if|for|while|with|try|except|finally|return|else|elif)\b|@|#|[A-Za-z_][\w.]*(\[[^\]]*\])?\s*(=|\(|:|\+=))`)
)

// bareFile cuts a file that came without fences out of the prose around it: from the first line
// that starts Python code to the last line that can still be code.
func bareFile(text string) string {
	lines := strings.Split(text, "\n")
	start := -1
	for i, l := range lines {
		if reCodeStart.MatchString(l) {
			start = i
			break
		}
	}
	if start < 0 {
		return ""
	}
	end := len(lines)
	for end > start && (strings.TrimSpace(lines[end-1]) == "" || !reCodeLine.MatchString(lines[end-1])) {
		end--
	}
	src := strings.Join(lines[start:end], "\n") + "\n"
	if !defines(src) {
		return ""
	}
	return src
}
