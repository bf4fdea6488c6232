// Command kbplugin-target-local serves the local target as a plugin. Build it with cgo (the
// default when gcc is present) so that it reads GPU fingerprints through NVML; kbplatform finds it
// next to its own binary.
package main

import (
	"github.com/kbplatform/kbplatform/plugins/targets/local"
	"github.com/kbplatform/kbplatform/sdk"
)

func main() {
	t := local.New()
	defer t.Close()
	sdk.Serve(t)
}
