# Shared by the scripts in this folder: find Go, and a Python that imports torch.

die() { echo "kbplatform: $*" >&2; exit 1; }

need_go() {
	command -v go >/dev/null 2>&1 || die "Go 1.26 or newer is required (https://go.dev/dl/)"
}

# find_python prints the first interpreter that imports torch: $KBP_PYTHON, then the usual places.
find_python() {
	for p in "${KBP_PYTHON:-}" "$(command -v python3 2>/dev/null)" /usr/bin/python3 /opt/torch/.venv/bin/python3 /usr/local/bin/python3; do
		[ -n "$p" ] && [ -x "$p" ] || continue
		if "$p" -c 'import torch' >/dev/null 2>&1; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

as_root() {
	if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo "$@"; else die "need root to run: $*"; fi
}

# torch_headers PY succeeds when PY's torch can build C++ extensions: its headers and pybind11's.
torch_headers() {
	"$1" - >/dev/null 2>&1 <<'PY'
import os, sys
from torch.utils.cpp_extension import include_paths
paths = include_paths() + ["/usr/include", "/usr/local/include"]
has = lambda rel: any(os.path.exists(os.path.join(p, rel)) for p in paths)
sys.exit(0 if has("torch/extension.h") and has("pybind11/pybind11.h") else 1)
PY
}

# protoc_ready succeeds when protoc can compile the protocol: the compiler and the well-known types
# it imports (google/protobuf/struct.proto), which Debian ships apart, in libprotobuf-dev (only a
# Recommends of protobuf-compiler, which --no-install-recommends drops).
protoc_ready() {
	command -v protoc >/dev/null 2>&1 || return 1
	local d rc
	d=$(mktemp -d)
	echo 'syntax = "proto3"; import "google/protobuf/struct.proto";' >"$d/probe.proto"
	protoc -I "$d" --descriptor_set_out=/dev/null "$d/probe.proto" >/dev/null 2>&1
	rc=$?
	rm -rf "$d"
	return $rc
}

# install_deps installs what the contract worker needs, from Debian's packages, when it is missing:
# torch for the worker, pytest for its tests, g++ and ninja for C++ kernels (and, asked for, protoc
# and Slurm).
install_deps() {
	local missing="" py
	# C++ kernels include torch/extension.h, which includes pybind11; Debian ships those headers in
	# libtorch-dev and pybind11-dev, which python3-torch only recommends (a pip torch carries them).
	if ! py=$(find_python); then
		missing="$missing python3-torch python3-numpy libtorch-dev pybind11-dev"
		py=/usr/bin/python3
	elif [ "$py" = /usr/bin/python3 ] && ! torch_headers "$py"; then
		missing="$missing libtorch-dev pybind11-dev"
	fi
	if [ "${KBP_NEED_PYTEST:-0}" = 1 ] && ! "$py" -c 'import pytest' >/dev/null 2>&1; then missing="$missing python3-pytest"; fi
	command -v g++ >/dev/null 2>&1 || missing="$missing g++"
	command -v ninja >/dev/null 2>&1 || missing="$missing ninja-build"
	if [ "${KBP_NEED_PROTOC:-0}" = 1 ] && ! protoc_ready; then missing="$missing protobuf-compiler libprotobuf-dev"; fi
	# The cluster target's Slurm test starts a single-node Slurm (scripts/slurm/single-node).
	if [ "${KBP_NEED_SLURM:-0}" = 1 ] && ! { command -v munged && command -v slurmctld && command -v slurmd && command -v sbatch; } >/dev/null 2>&1; then
		missing="$missing slurmctld slurmd munge slurm-client"
	fi
	if [ -n "$missing" ]; then
		command -v apt-get >/dev/null 2>&1 || die "missing:$missing (install them, or set KBP_PYTHON to a python with torch)"
		echo "installing:$missing" >&2
		as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
		# shellcheck disable=SC2086
		as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing >&2
	fi
	find_python >/dev/null || die "no python with torch after installing; set KBP_PYTHON"
}

# build_binaries builds kbplatform (no cgo: the core never links C) and, next to it, the local
# target plugin with cgo so that it reads GPU fingerprints through NVML (without a C compiler it
# is skipped and kbplatform uses its built-in local target, which asks nvidia-smi instead).
build_binaries() {
	mkdir -p bin
	CGO_ENABLED=0 go build -o bin/kbplatform ./cmd/kbplatform
	if command -v gcc >/dev/null 2>&1; then
		CGO_ENABLED=1 CGO_CFLAGS="${CGO_CFLAGS:--O2} -Wno-deprecated-declarations" go build -o bin/kbplugin-target-local ./cmd/kbplugin-target-local
	fi
}

# use_cutlass_checkout points CUTLASS_PATH at third_party/cutlass (git-ignored, carried to a GPU
# machine) when it is unset and a checkout is there, so the CUTLASS kernels build.
use_cutlass_checkout() {
	if [ -z "${CUTLASS_PATH:-}" ] && [ -f third_party/cutlass/include/cutlass/cutlass.h ]; then
		export CUTLASS_PATH=$PWD/third_party/cutlass
	fi
}

# gpu_platform KBPLATFORM [PYTHON] prints what a device run's numbers depend on: the date, the GPU
# (name, driver, memory, clocks, temperature) when nvidia-smi is there, torch, CUDA and Triton, the
# cores, and the binary's version and contract. The GPU scripts keep it beside their results.
gpu_platform() {
	date -u
	command -v nvidia-smi >/dev/null 2>&1 &&
		nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
	"${2:-python3}" -c '
import torch
try:
    import triton
    t = triton.__version__
except ImportError:
    t = "none"
print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", t)'
	echo "cores $(nproc)"
	"$1" version
}
