package faults

// SizeName is the task size a campaign evaluates at unless told otherwise.
const SizeName = "faults"

// Sizes are the campaign's task sizes, by task. Every extent is small, so that a C++ campaign
// fits in CI, and none is a multiple of a block, a vector width or a chunk (257 is prime and one
// past 256; 13, 37, 70, 100 and 300 leave remainders by 4, 6, 8, 16, 32, 64 and 256), so that code
// written for whole blocks only is wrong here. At the suite's own sizes (powers of two, and
// multiples of 16 or 1024 on the GPU) a remainder is never exercised, and a kernel that forgets it
// passes: the contract checks one size per task (docs/contract.md, "Fault-injection campaign").
// matmul's K = 300 is past the C++ GEMM's 256-deep panel, so a second panel is accumulated.
func Sizes() map[string]map[string]any {
	rows := map[string]any{"batch_size": 13, "dim": 257}
	return map[string]map[string]any{
		"kbp/l1/relu":             rows,
		"kbp/l1/softmax":          rows,
		"kbp/l1/layernorm":        rows,
		"kbp/l1/mse_loss":         rows,
		"kbp/l1/matmul":           {"M": 100, "K": 300, "N": 70},
		"kbp/l2/linear_bias_gelu": {"batch_size": 37, "in_features": 300, "out_features": 70},
	}
}
