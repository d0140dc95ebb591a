#!/usr/bin/env bash
# Builds the Lambda layer exactly as `sam build` does (layers/core/Makefile) into a temporary folder and
# fails if its unzipped size is above the project's limit. Lambda allows 250 MB (MiB) unzipped for a
# function with all its layers; the handlers themselves are a few kB, so the layer gets 220 MiB, which
# leaves room to notice growth before a deploy fails.
#
#   scripts/layer-size.sh [PYTHON]     (PYTHON: an interpreter with pip; default .venv/bin/python)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${1:-$ROOT/.venv/bin/python}"
LIMIT_MIB="${SEQLAKE_LAYER_LIMIT_MIB:-220}"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT

make --no-print-directory -s -f "$ROOT/layers/core/Makefile" build-CoreLayer ARTIFACTS_DIR="$OUT" PY="$PY"
bytes="$(du -s --bytes --apparent-size "$OUT" | cut -f1)"
mib="$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')"
echo "layer-size: CoreLayer unzipped ${bytes} bytes (${mib} MiB; limit ${LIMIT_MIB} MiB)"
if (( bytes > LIMIT_MIB * 1048576 )); then
  echo "layer-size: above ${LIMIT_MIB} MiB: trim layers/core/Makefile or the layer's requirements" >&2
  exit 1
fi
