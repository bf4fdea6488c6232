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

# install_deps installs what the contract worker needs, from Debian's packages, when it is missing:
# torch for the worker, pytest for its tests, g++ and ninja for C++ kernels.
install_deps() {
	local missing=""
	if ! find_python >/dev/null; then missing="$missing python3-torch python3-numpy"; fi
	local py
	py=$(find_python || echo /usr/bin/python3)
	if [ "${KBP_NEED_PYTEST:-0}" = 1 ] && ! "$py" -c 'import pytest' >/dev/null 2>&1; then missing="$missing python3-pytest"; fi
	command -v g++ >/dev/null 2>&1 || missing="$missing g++"
	command -v ninja >/dev/null 2>&1 || missing="$missing ninja-build"
	if [ "${KBP_NEED_PROTOC:-0}" = 1 ] && ! command -v protoc >/dev/null 2>&1; then missing="$missing protobuf-compiler"; fi
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
