package queue

import (
	"fmt"
	"regexp"
	"strings"
)

// KindCPU is the kind of a worker that evaluates on the CPU.
const KindCPU = "cpu"

var kindRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// ValidKind checks that a kind can be one NATS subject token.
func ValidKind(kind string) error {
	if !kindRE.MatchString(kind) {
		return fmt.Errorf("GPU kind %q: want lower-case letters, digits, - or _ (e.g. h200, l40s, cpu)", kind)
	}
	return nil
}

// noise are the words of a GPU's marketing name that say nothing about which GPU it is.
var noise = map[string]bool{"nvidia": true, "geforce": true, "rtx": true, "tesla": true, "quadro": true,
	"pcie": true, "nvl": true, "sxm": true}

var noiseRE = regexp.MustCompile(`^(\d+gb|sxm\d*|hbm\d*e?|pcie\d*|nvl\d*)$`)

// GPUKind names a GPU's kind from its NVML (or torch) name, the way a study names the kinds it
// wants: "NVIDIA H200" is h200, "NVIDIA H100 80GB HBM3" h100, "Tesla V100-SXM2-32GB" v100,
// "NVIDIA GeForce RTX 2080 Ti" 2080ti, "NVIDIA L40S" l40s. Workers take their kind from this,
// never from the job script, so that a job lands only where the hardware is what it asks for.
func GPUKind(name string) string {
	name = strings.ToLower(strings.NewReplacer("-", " ", "_", " ", "/", " ").Replace(name))
	var parts []string
	for _, w := range strings.Fields(name) {
		if noise[w] || noiseRE.MatchString(w) {
			continue
		}
		parts = append(parts, w)
	}
	kind := strings.Join(parts, "")
	kind = regexp.MustCompile(`[^a-z0-9_-]`).ReplaceAllString(kind, "")
	if len(kind) > 32 {
		kind = kind[:32]
	}
	if kind == "" {
		return "gpu"
	}
	return kind
}

// DeviceOf is the device name a study uses for a kind: cpu, or cuda:<kind> (so that sizes and
// bundled kernels pick their GPU variant).
func DeviceOf(kind string) string {
	if kind == KindCPU {
		return "cpu"
	}
	return "cuda:" + kind
}

// KindOf is the kind a study's device names: cpu, cuda:h200 (or a bare h200).
func KindOf(device string) (string, error) {
	kind := device
	if device == "cpu" {
		kind = KindCPU
	} else if k, ok := strings.CutPrefix(device, "cuda:"); ok {
		kind = k
	}
	if kind == "cuda" || strings.Trim(kind, "0123456789") == "" {
		return "", fmt.Errorf("device %q names no GPU kind: use cuda:<kind>, e.g. cuda:h200", device)
	}
	if err := ValidKind(kind); err != nil {
		return "", err
	}
	return kind, nil
}
