package extract

import (
	"errors"
	"strings"
	"testing"

	"github.com/kbplatform/kbplatform/sdk"
)

const file = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"

const fence = "```"

func TestSource(t *testing.T) {
	cases := []struct {
		name  string
		reply string
		want  string
	}{
		{"one python block", "Here it is:\n" + fence + "python\n" + file + fence + "\n", file},
		{"no language tag", fence + "\n" + file + fence, file},
		{"py tag with a title", fence + "py title=\"model_new.py\"\n" + file + fence + "\nDone.", file},
		{"kernel fragment first, then the file",
			"The kernel:\n" + fence + "cuda\n__global__ void k() {}\nclass ModelNew {};\n" + fence + "\nand the module:\n" + fence + "python\n" + file + fence + "\n", file},
		{"a helper block without ModelNew is skipped",
			fence + "python\nprint('test')\n" + fence + "\n" + fence + "python\n" + file + fence + "\n" + fence + "python\nModelNew()(x)\n" + fence, file},
		{"the last revision wins",
			fence + "python\nclass ModelNew: pass\n" + fence + "\nOops, fixed:\n" + fence + "python\n" + file + fence, file},
		{"think section with a draft before the answer",
			"<think>\nMaybe:\n" + fence + "python\nclass ModelNew: draft\n" + fence + "\n</think>\n" + fence + "python\n" + file + fence, file},
		{"closing think tag only", "I will fuse the ops.\n" + fence + "python\nclass ModelNew: draft\n" + fence + "</think>\n\n" + fence + "python\n" + file + fence, file},
		{"THINKING in upper case", "<THINKING>plan</THINKING>" + "\n" + fence + "python\n" + file + fence, file},
		{"tilde fence", "~~~python\n" + file + "~~~\n", file},
		{"four backticks around a block that shows three",
			"````python\n" + file + "# ```not a fence```\n````\n", file + "# ```not a fence```\n"},
		{"reply cut off inside its block", "Sure.\n" + fence + "python\n" + file, file},
		{"windows line ends", strings.ReplaceAll(fence+"python\n"+file+fence+"\n", "\n", "\r\n"), file},
		{"bare file with prose around it", "Here is my solution.\n\n" + file + "\nHope this helps!\n", file},
		{"indented fence in a list", "1. The file:\n   " + fence + "python\n" + file + "   " + fence + "\n", file},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Source(c.reply)
			if err != nil {
				t.Fatalf("Source: %v", err)
			}
			if got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestSourceClassifiesReplyWithoutModelNew(t *testing.T) {
	cases := []struct {
		name, reply, want string
	}{
		{"prose only", "I cannot help with that.", "no code block"},
		{"only a CUDA block", fence + "cuda\n__global__ void k() {}\n" + fence, "no Python one"},
		{"python without ModelNew", fence + "python\nclass Model(nn.Module): pass\n" + fence, "no Python code block defines class ModelNew"},
		{"reasoning never closed", "<think>\nlet me consider " + fence + "python\nclass ModelNew: pass\n" + fence, "ended inside its reasoning"},
		{"ModelNew only in a comment of prose", "You would write a ModelNew class.", "no code block"},
		{"the file is only in the reasoning", "<think>" + fence + "python\n" + file + fence + "</think>\nI give up.", "no code block"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Source(c.reply)
			if !errors.Is(err, sdk.ErrNoCode) {
				t.Fatalf("got %q, %v; want sdk.ErrNoCode", got, err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not say %q", err, c.want)
			}
		})
	}
}
