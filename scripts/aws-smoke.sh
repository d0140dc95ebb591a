#!/usr/bin/env bash
# The first-deploy smoke test (docs/DEPLOY.md, "A first deploy on a new account"): deploys a stack of its own,
# runs one tiny upload (1,000 simulated read pairs, QC only) through to an Athena query, and tears everything
# down (the bucket's objects, the worker images, the stack). Cost bound: under $1 (seqlake.aws.smoke,
# COST_BOUND_USD: one small instance for at most the run's hour, a few Lambda/Step Functions requests, one
# Athena query; the stack costs nothing idle and is deleted).
#
#   scripts/aws-smoke.sh --region us-east-1 --subnets subnet-a,subnet-b --security-groups sg-1 [--keep]
#   scripts/aws-smoke.sh --local       # the same steps against the local cloud (no account, no sam, no docker)
#
# AWS needs: credentials allowed to deploy the template (CloudFormation, IAM roles, Batch, ...), sam, docker
# (with buildx), the AWS CLI v2. The stack is named seqlake-smoke-<time> and its Stage smoke<HHMMSS>, so it
# shares no resource name with dev or prod. A failure at any step still tears down (unless --keep).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PY:-$ROOT/.venv/bin/python}"
[[ -x "$PY" ]] || PY=python3

if [[ "${1:-}" == "--local" ]]; then
  # the deploy is the local cloud's own deployer of the same template.yaml (tests/local/test_smoke.py)
  exec "$PY" -m seqlake.local.smoke "${@:2}"
fi

REGION="" SUBNETS="" GROUPS_="" KEEP=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --region) REGION="$2"; shift 2 ;;
    --subnets) SUBNETS="$2"; shift 2 ;;
    --security-groups) GROUPS_="$2"; shift 2 ;;
    --keep) KEEP="--keep"; shift ;;
    *) echo "aws-smoke: unknown argument $1 (see the head of $0)" >&2; exit 2 ;;
  esac
done
if [[ -z "$REGION" || -z "$SUBNETS" || -z "$GROUPS_" ]]; then
  echo "aws-smoke: --region, --subnets and --security-groups are required (or --local)" >&2
  exit 2
fi
for tool in sam docker aws; do
  command -v "$tool" >/dev/null || { echo "aws-smoke: $tool is needed on PATH" >&2; exit 1; }
done

STAMP="$(date -u +%H%M%S)"
STACK="seqlake-smoke-$(date -u +%Y%m%d)-$STAMP"
STAGE="smoke$STAMP"
deleted=""
cleanup() {
  # the smoke's own teardown empties the bucket and the repository and deletes the stack; this is the
  # net for a failure before it ran (a deploy or a push that failed)
  if [[ -z "$KEEP" && -z "$deleted" ]]; then
    "$PY" -m seqlake.aws.smoke --stack-name "$STACK" --region "$REGION" --teardown-only \
      || sam delete --stack-name "$STACK" --region "$REGION" --no-prompts || true
  fi
}
trap cleanup EXIT

deploy() {
  sam deploy --stack-name "$STACK" --region "$REGION" --resolve-s3 --no-confirm-changeset \
    --no-fail-on-empty-changeset --capabilities CAPABILITY_IAM CAPABILITY_AUTO_EXPAND \
    --parameter-overrides Stage="$STAGE" GlueDatabaseName="seqlake_$STAGE" Subnets="$SUBNETS" \
    SecurityGroupIds="$GROUPS_" SpotMaxVcpus=4 OnDemandMaxVcpus=0 "$@"
}
echo "aws-smoke: deploying $STACK in $REGION"
sam build
deploy
REPO_URI="$(aws cloudformation describe-stacks --region "$REGION" --stack-name "$STACK" \
  --query "Stacks[0].Outputs[?OutputKey=='WorkerRepositoryUri'].OutputValue" --output text)"
TAG="smoke-$STAMP"
docker buildx build --platform linux/amd64 --load -f containers/worker/Dockerfile -t "$REPO_URI:$TAG" .
aws ecr get-login-password --region "$REGION" | docker login --username AWS --password-stdin "${REPO_URI%%/*}"
docker push "$REPO_URI:$TAG"
deploy WorkerImageTag="$TAG"
"$PY" -m seqlake.aws.smoke --stack-name "$STACK" --region "$REGION" $KEEP && status=0 || status=$?
deleted=1  # the smoke tore down (or was told to keep)
exit "$status"
