package rules

// Facts are what analyze.py finds in a candidate and its task's reference, without running either.
type Facts struct {
	// ReferenceOps are the PyTorch operators the reference forward calls (normalised names:
	// conv for nn.Conv2d and F.conv2d, matmul for @, mm, bmm and linear), less data movement.
	ReferenceOps          []string `json:"reference_ops"`
	ReferenceLowPrecision bool     `json:"reference_low_precision"`
	ReferenceError        string   `json:"reference_error"`

	ParseError  string            `json:"parse_error"`
	HasModelNew bool              `json:"has_modelnew"`
	Kernels     map[string]Kernel `json:"kernels"` // by language: cuda, cutlass, cpp, triton
	// ReachedOps are the reference's operators (and others) that ModelNew.forward reaches, with
	// where; FallbackOps those it reaches only inside except handlers.
	ReachedOps  map[string]string `json:"reached_ops"`
	FallbackOps map[string]string `json:"fallback_ops"`
	Threads     []string          `json:"threads"`
	Patches     []string          `json:"patches"`
	Downcasts   []string          `json:"downcasts"`
	Dynamic     []string          `json:"dynamic"`
}

// Kernel is the evidence that kernels of one language are defined and launched from forward.
type Kernel struct {
	Defined  []string `json:"defined"`
	Launched []string `json:"launched"`
}
