package kernellang

import (
	_ "embed"
	"fmt"
	"io/fs"
	"strings"
	"text/template"

	"github.com/kbplatform/kbplatform/sdk"
)

// The skeleton every language's prompt shares: the language's files fill it.
//
//go:embed prompt.tmpl
var skeleton string

type prompts struct {
	system, instructions, example, fewshot, hardware string
	tmpl                                             *template.Template
}

func loadPrompts(files fs.FS) (*prompts, error) {
	if files == nil {
		return nil, fmt.Errorf("no prompt files")
	}
	read := func(name string) (string, error) {
		b, err := fs.ReadFile(files, name)
		if err != nil {
			return "", err
		}
		s := strings.TrimSpace(string(b))
		if s == "" {
			return "", fmt.Errorf("%s is empty", name)
		}
		return s, nil
	}
	p := &prompts{}
	for name, dst := range map[string]*string{"system.txt": &p.system, "instructions.md": &p.instructions,
		"example.md": &p.example, "fewshot.md": &p.fewshot, "hardware.md": &p.hardware} {
		s, err := read(name)
		if err != nil {
			return nil, err
		}
		*dst = s
	}
	t, err := template.New("prompt").Option("missingkey=error").Parse(skeleton)
	if err != nil {
		return nil, err
	}
	p.tmpl = t
	return p, nil
}

// promptData is what the skeleton sees.
type promptData struct {
	Language      string
	Variant       string
	Instructions  string
	Example       string
	FewShot       string // empty unless the few-shot variant
	Hardware      []string
	HardwareNotes string // empty unless the hardware-aware variant
	Reasoning     bool
	TaskID        string
	Source        string
	Feedback      string
}

func (p *prompts) render(lang Language, variant string, req sdk.PromptRequest) (string, error) {
	d := promptData{Language: lang.Display, Variant: variant, Instructions: p.instructions, Example: p.example,
		TaskID: req.Task.ID, Source: strings.TrimRight(req.Task.Source, "\n"), Feedback: strings.TrimSpace(req.Feedback)}
	switch variant {
	case sdk.VariantFewShot:
		d.FewShot = p.fewshot
	case sdk.VariantHardwareAware:
		d.Hardware = HardwareFacts(req.Hardware, lang.Device)
		d.HardwareNotes = p.hardware
	case sdk.VariantChainOfThought:
		d.Reasoning = true
	}
	var b strings.Builder
	if err := p.tmpl.Execute(&b, d); err != nil {
		return "", fmt.Errorf("prompt: %w", err)
	}
	return strings.TrimSpace(b.String()) + "\n", nil
}
