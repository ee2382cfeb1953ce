#!/usr/bin/env bash
# Draws the three pictures the README shows and renders each to PNG with rsvg-convert
# (librsvg2-bin, from scripts/install-deps.sh):
#   plan.svg/.png      canzona plan --svg: qwen3-32b at DP 32 x TP 8, Muon, per-rank optimizer
#                      FLOPs and memory of lb-asc beside the strongest peer
#   simulate.svg/.png  canzona simulate --svg: the paper's setting (qwen3-32b, 256 H100s), every
#                      strategy
#   loss.svg/.png      canzona train --plot-from: qwen3-tiny at DP 2, every strategy (bitwise
#                      identical, so drawn once), Muon and AdamW, 60 steps
# Usage: scripts/render-pictures.sh [--quick] [--build DIR] [--out DIR]
#   --quick  the loss picture from 8 steps of one process (sc and lb-asc, Muon and AdamW): what
#            the pictures test (tests/pictures) draws in a few seconds
#   --build  the build directory (default build); --out where the files go (default docs/img)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$root/build
out=$root/docs/img
quick=0
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1 ;;
    --build) build=$2; shift ;;
    --out) out=$2; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "canzona: error: render-pictures.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
canzona=$build/apps/canzona
[ -x "$canzona" ] || { echo "canzona: error: render-pictures.sh: $canzona is not built" >&2; exit 2; }
rsvg=$(command -v rsvg-convert) ||
  { echo "canzona: error: render-pictures.sh: rsvg-convert missing (scripts/install-deps.sh)" >&2; exit 2; }
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OPENBLAS_NUM_THREADS=1

"$canzona" plan --model qwen3-32b --dp 32 --tp 8 --optimizer muon --svg "$out/plan.svg" >/dev/null
"$canzona" simulate --svg "$out/simulate.svg" >/dev/null
for opt in muon adamw; do
  if [ "$quick" = 1 ]; then
    "$canzona" train --model qwen3-tiny --strategies sc,lb-asc --optimizer $opt --steps 8 \
      --warmup 2 --eval-every 4 --json "$tmp/$opt.json" >/dev/null
  else
    mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np 2 "$canzona" train \
      --model qwen3-tiny --dp 2 --strategies all --optimizer $opt --steps 60 --warmup 5 \
      --eval-every 10 --json "$tmp/$opt.json" >/dev/null
  fi
done
"$canzona" train --plot-from "$tmp/muon.json,$tmp/adamw.json" --plot "$out/loss.svg" >/dev/null
for picture in plan simulate loss; do
  "$rsvg" -o "$out/$picture.png" "$out/$picture.svg"
done
echo "render-pictures: $out/{plan,simulate,loss}.{svg,png}"
