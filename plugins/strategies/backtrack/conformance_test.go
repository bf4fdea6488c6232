package backtrack

import (
	"testing"

	"github.com/kbplatform/kbplatform/sdk/plugintest"
)

func TestConformance(t *testing.T) {
	plugintest.RunStrategyConformance(t, New(), nil)
}
