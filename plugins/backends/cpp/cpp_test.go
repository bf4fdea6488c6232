package cpp

import (
	"testing"

	"github.com/kbplatform/kbplatform/sdk/plugintest"
)

func TestConformance(t *testing.T) {
	plugintest.RunBackendConformance(t, New(), nil, plugintest.GoodReply)
}

func TestExtractPicksTheModelNewBlock(t *testing.T) {
	reply := "First a sketch:\n```cpp\nint f();\n```\nthen:\n```python\nprint('helper')\n```\nand the answer:\n```python\nclass ModelNew:\n    pass\n```\n"
	got, err := Extract(reply)
	if err != nil || got != "class ModelNew:\n    pass\n" {
		t.Fatalf("got %q, %v", got, err)
	}
}
