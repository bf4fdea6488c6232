package local

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/kbplatform/kbplatform/sdk/plugintest"
)

func TestConformance(t *testing.T) {
	cfg, _ := json.Marshal(Settings{Python: os.Getenv("KBP_PYTHON"), WorkDir: t.TempDir(), CacheDir: filepath.Join(os.TempDir(), "kbp-local-test-cache")})
	tg := New()
	defer tg.Close()
	plugintest.RunTargetConformance(t, tg, cfg, plugintest.DefaultTargetCase())
}
