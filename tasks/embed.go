// Package tasks embeds kbplatform's own task suite (docs/tasks.md describes the format).
package tasks

import "embed"

// FS holds level1/, level2/ and level3/, each NAME.py with NAME.yaml beside it.
//
//go:embed level1 level2 level3
var FS embed.FS
