#!/usr/bin/env bash
# Installs everything Canzona needs to build, test and run: Debian packages, then the project's
# Python stack (torch 2.x and the Hugging Face libraries, requirements.txt) in the virtual
# environment .venv, made with Debian's /usr/bin/python3. Idempotent: packages that are already
# installed are skipped, `apt-get update` runs only when something is missing, and .venv is
# rebuilt only when requirements.txt changed since it was made (.venv/canzona-requirements.txt
# holds the copy it was made from).
# Usage: scripts/install-deps.sh [--fuzz | --bf16-candidates]   (as root, or with sudo available;
#         no stdin needed)
#   --fuzz  only the packages `make fuzz` needs on top: clang and its libFuzzer / sanitizer runtime
#           (Debian bookworm: clang 14, libclang-rt-14-dev). `make test` never needs them.
#   --bf16-candidates  only the bf16 GEMM libraries bench/optim/bf16-candidates.sh compares (PyPI's
#           MKL and oneDNN, pinned in bench/optim/bf16-candidates-requirements.txt, about 2.7 GB)
#           in .venv-bf16-candidates. `make test` never needs them.
# CANZONA_VENV=DIR puts the environment elsewhere (CMake's -DCANZONA_PYTHON=DIR/bin/python).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libgtest-dev libgmock-dev libbenchmark-dev
  openmpi-bin libopenmpi-dev
  libopenblas-dev liblapacke-dev
  libdnnl-dev  # oneDNN 2.6.3: Muon's bf16 Newton-Schulz products on AMX / AVX512-BF16 (src/optim/onednn.cpp)
  libcli11-dev nlohmann-json3-dev
  libsentencepiece-dev sentencepiece fortunes
  python3-venv python3-dev pybind11-dev  # .venv and the Python package (python/, docs/python.md)
  python3-numpy  # the tests' independent readers of safetensors and checkpoints (tests/ckpt, tests/train)
  libgoogle-perftools-dev  # tcmalloc: canzona-train links it, vs-pytorch.sh gives it to PyTorch
  iproute2 util-linux  # ip netns / ip tuntap and unshare: scripts/cluster.sh, tests/cluster
  librsvg2-bin  # rsvg-convert: the pictures test (tests/pictures), scripts/render-pictures.sh
)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ "${1:-}" = "--fuzz" ]; then
  packages=(clang libclang-rt-14-dev)
elif [ "${1:-}" = "--bf16-candidates" ]; then
  venv=$root/.venv-bf16-candidates
  pins=$root/bench/optim/bf16-candidates-requirements.txt
  if [ -x "$venv/bin/python" ] && cmp -s "$pins" "$venv/canzona-requirements.txt"; then
    echo "install-deps: $venv matches $pins"
    exit 0
  fi
  echo "install-deps: making $venv (MKL and oneDNN from PyPI, about 2.7 GB)"
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --no-input --no-deps -r "$pins" </dev/null
  cp "$pins" "$venv/canzona-requirements.txt"
  exit 0
elif [ $# -gt 0 ]; then
  echo "usage: scripts/install-deps.sh [--fuzz | --bf16-candidates]" >&2
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
else
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
fi
[ "${1:-}" = "--fuzz" ] && exit 0

# The Python stack. pip reads only PyPI (and PIP_* settings of the machine); every package is
# pinned in requirements.txt, so the wheels are the same on every machine.
venv=${CANZONA_VENV:-$root/.venv}
stamp=$venv/canzona-requirements.txt
if [ -x "$venv/bin/python" ] && cmp -s "$root/requirements.txt" "$stamp"; then
  echo "install-deps: $venv matches requirements.txt"
  exit 0
fi
echo "install-deps: making $venv from requirements.txt (torch 2.x; about 5.6 GB with its CUDA libraries)"
rm -rf "$venv"
/usr/bin/python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --no-input -r "$root/requirements.txt" </dev/null
cp "$root/requirements.txt" "$stamp"
