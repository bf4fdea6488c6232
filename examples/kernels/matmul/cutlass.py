"""C = A @ B (fp32) with a CUTLASS device GEMM: exact fp32 FMA on the CUDA cores (SIMT), no TF32.

cutlass::gemm::device::Gemm (the 2.x device API, still shipped by CUTLASS 3.x/4.x) with both
operands row-major, as torch stores them, and a row-major output. SIMT fp32 with Ampere's
multistage pipeline (cp.async, 3 stages of 128x128x8 tiles, 8 warps of 32x64): built for SM80
instructions, it runs on SM90 as is. Tensor cores would need TF32 (a 10-bit mantissa), which the
task's tolerance and the contract's precision policy rule out. Needs the cutlass backend's
cutlass_path (its recipe adds CUTLASS's include/ to the build).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_DECL = "torch::Tensor cutlass_matmul(torch::Tensor a, torch::Tensor b);"

_CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <cutlass/cutlass.h>
#include <cutlass/gemm/device/gemm.h>
#include <cutlass/epilogue/thread/linear_combination.h>
#include <cutlass/gemm/threadblock/threadblock_swizzle.h>

namespace {

using RowMajor = cutlass::layout::RowMajor;

// D = 1 * (A @ B) + 0 * C, everything float32.
using Gemm = cutlass::gemm::device::Gemm<
    float, RowMajor,                                   // A
    float, RowMajor,                                   // B
    float, RowMajor,                                   // C and D
    float,                                             // accumulator
    cutlass::arch::OpClassSimt,
    cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<128, 128, 8>,             // threadblock tile
    cutlass::gemm::GemmShape<32, 64, 8>,               // warp tile
    cutlass::gemm::GemmShape<1, 1, 1>,                 // SIMT instruction
    cutlass::epilogue::thread::LinearCombination<float, 1, float, float>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>,
    3>;                                                // pipeline stages (as CUTLASS's own SM80 SIMT tests)

}  // namespace

torch::Tensor cutlass_matmul(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda() && a.device() == b.device(), "cutlass_matmul: expected CUDA tensors on one device");
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32, "cutlass_matmul: expected float32");
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "cutlass_matmul: expected (M, K) @ (K, N)");
    const c10::cuda::CUDAGuard guard(a.device());
    a = a.contiguous();
    b = b.contiguous();
    const int m = static_cast<int>(a.size(0));
    const int k = static_cast<int>(a.size(1));
    const int n = static_cast<int>(b.size(1));
    auto c = torch::empty({m, n}, a.options());
    if (m == 0 || n == 0) return c;
    if (k == 0) return c.zero_();

    Gemm::Arguments args({m, n, k},
                         {a.data_ptr<float>(), k},   // A, leading dimension K
                         {b.data_ptr<float>(), n},   // B, leading dimension N
                         {c.data_ptr<float>(), n},   // C (unused: beta = 0)
                         {c.data_ptr<float>(), n},   // D
                         {1.0f, 0.0f});
    Gemm gemm;
    cutlass::Status status = gemm.can_implement(args);
    TORCH_CHECK(status == cutlass::Status::kSuccess, "cutlass_matmul: cannot implement: ", cutlassGetStatusString(status));
    // split_k_slices = 1: no workspace.
    status = gemm(args, nullptr, at::cuda::getCurrentCUDAStream());
    TORCH_CHECK(status == cutlass::Status::kSuccess, "cutlass_matmul: ", cutlassGetStatusString(status));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return c;
}
"""

_ext = load_inline(
    name="kbp_matmul_cutlass",
    cpp_sources=_CPP_DECL,
    cuda_sources=_CUDA_SOURCE,
    functions=["cutlass_matmul"],
    # PyTorch builds extensions with its half-precision operators switched off; CUTLASS's numeric
    # headers (included by every GEMM) expect CUDA's own.
    extra_cuda_cflags=["-O3", "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
                       "-U__CUDA_NO_HALF2_OPERATORS__", "-U__CUDA_NO_BFLOAT16_CONVERSIONS__"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return _ext.cutlass_matmul(A, B)
