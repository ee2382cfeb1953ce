#!/usr/bin/env bash
# Installs every Debian package Canzona needs to build, test and run. Idempotent: packages that are
# already installed are skipped, and `apt-get update` runs only when something is missing.
# Usage: scripts/install-deps.sh [--fuzz]   (as root, or with sudo available; no stdin needed)
#   --fuzz  only the packages `make fuzz` needs on top: clang and its libFuzzer / sanitizer runtime
#           (Debian bookworm: clang 14, libclang-rt-14-dev). `make test` never needs them.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libgtest-dev libgmock-dev libbenchmark-dev
  openmpi-bin libopenmpi-dev
  libopenblas-dev liblapacke-dev
  libcli11-dev nlohmann-json3-dev
  libtorch-dev libsentencepiece-dev sentencepiece fortunes
  python3-torch python3-numpy
  pybind11-dev python3-dev python3-pytest  # the Python package (python/, docs/python.md)
  libgoogle-perftools-dev  # tcmalloc: canzona-train links it, vs-pytorch.sh gives it to PyTorch
)
if [ "${1:-}" = "--fuzz" ]; then
  packages=(clang libclang-rt-14-dev)
elif [ $# -gt 0 ]; then
  echo "usage: scripts/install-deps.sh [--fuzz]" >&2
  exit 2
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
