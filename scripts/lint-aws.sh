#!/usr/bin/env bash
# Static checks of the AWS app: `sam validate --lint` (cfn-lint) on template.yaml, asl-validator on the
# state machine, checkov on the template.
#
# The tools live in .tools/ (one venv each for SAM CLI and checkov, node_modules for asl-validator), pinned,
# so they never touch the project's own pinned boto3. Idempotent: a tool already installed at its pin is
# not installed again (a stamp file records the pin), so a second run only runs the checks.
#
#   scripts/lint-aws.sh            install if needed, then run all three checks
#   scripts/lint-aws.sh --install  install only
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="${SEQLAKE_TOOLS_DIR:-$ROOT/.tools}"
SAM_CLI_VERSION=1.170.0
CHECKOV_VERSION=3.3.30
ASL_VALIDATOR_VERSION=4.0.0
# SAM CLI and checkov support Python 3.9+; any python3 on PATH will do (the project's venv is left alone).
PYTHON="${SEQLAKE_TOOLS_PYTHON:-python3}"

install_venv() {  # name package version
  local dir="$TOOLS/$1" stamp="$TOOLS/$1/.installed"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$2==$3" ]]; then return; fi
  rm -rf "$dir"
  if [[ -n "${UV:-}" ]]; then  # make aws-tools passes uv (the Makefile pins it): seconds where pip took minutes
    "$UV" venv --quiet --python "$PYTHON" "$dir"
    "$UV" pip install --quiet --python "$dir/bin/python" "$2==$3"
  else
    "$PYTHON" -m venv "$dir"
    "$dir/bin/pip" install --quiet --disable-pip-version-check "$2==$3"
  fi
  echo "$2==$3" > "$stamp"
}

install_npm() {
  local dir="$TOOLS/node" stamp="$TOOLS/node/.installed"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "asl-validator@$ASL_VALIDATOR_VERSION" ]]; then return; fi
  mkdir -p "$dir"
  npm install --silent --no-audit --no-fund --prefix "$dir" "asl-validator@$ASL_VALIDATOR_VERSION" >/dev/null
  echo "asl-validator@$ASL_VALIDATOR_VERSION" > "$stamp"
}

install_all() {  # the three side by side: each mostly waits on its downloads
  mkdir -p "$TOOLS"
  local pids=() failed=0
  install_venv sam aws-sam-cli "$SAM_CLI_VERSION" & pids+=($!)
  install_venv checkov checkov "$CHECKOV_VERSION" & pids+=($!)
  install_npm & pids+=($!)
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  [[ $failed == 0 ]] || { echo "lint-aws: installing the tools failed (output above)" >&2; exit 1; }
}

install_all
[[ "${1:-}" == "--install" ]] && exit 0

cd "$ROOT"
# sam validate --lint needs a region but no credentials; telemetry off so CI makes no calls home.
export AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}" SAM_CLI_TELEMETRY=0
echo "== sam validate --lint"
"$TOOLS/sam/bin/sam" validate --lint --template-file template.yaml
echo "== asl-validator"
"$TOOLS/node/node_modules/.bin/asl-validator" --json-path statemachines/pipeline.asl.json
echo "== checkov"
# --skip-download: no calls to the vendor's platform (CI is offline-friendly and faster); no check for a newer
# checkov on PyPI either (it is pinned), which also wrote its answer into the user's ~/.cache/checkov
CKV_SKIP_PACKAGE_UPDATE_CHECK=true "$TOOLS/checkov/bin/checkov" --quiet --compact --skip-download --framework cloudformation --file template.yaml
echo "lint-aws: all checks passed"
