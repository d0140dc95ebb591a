#!/usr/bin/env bash
# Build the worker image, push it to the stack's ECR repository, and deploy the stack with it.
#
#   scripts/push-worker-image.sh ENV        (ENV = a samconfig.toml section: dev, prod, ...)
#
# The stack must exist (`sam build && sam deploy --config-env ENV` once): it owns the repository.
# The repository's tags are immutable, so every push gets a new tag: <version>-<git short sha>[-dirty]
# -<UTC time>. The script writes that tag into ENV's WorkerImageTag in samconfig.toml (the one place
# the deployed tag is recorded) and runs `sam deploy --config-env ENV`, which registers a new job
# definition revision. Needs: docker (with buildx), the AWS CLI v2, sam, git, python3, credentials.
set -euo pipefail

ENV_NAME="${1:?usage: $0 ENV (a section of samconfig.toml, e.g. dev)}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

read -r STACK REGION < <(python3 scripts/samconfig_env.py "$ENV_NAME")

REPO_URI="$(aws cloudformation describe-stacks --region "$REGION" --stack-name "$STACK" \
  --query "Stacks[0].Outputs[?OutputKey=='WorkerRepositoryUri'].OutputValue" --output text)"
if [[ -z "$REPO_URI" || "$REPO_URI" == "None" ]]; then
  echo "stack $STACK has no WorkerRepositoryUri output: deploy it first (sam deploy --config-env $ENV_NAME)" >&2
  exit 1
fi

VERSION="$(python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml","rb"))["project"]["version"])')"
SHA="$(git rev-parse --short=12 HEAD 2>/dev/null || echo nogit)"
DIRTY="$(git diff --quiet HEAD -- src pyproject.toml containers 2>/dev/null || echo -dirty)"
TAG="${VERSION}-${SHA}${DIRTY}-$(date -u +%Y%m%dT%H%M%SZ)"

echo "building $REPO_URI:$TAG"
docker buildx build --platform linux/amd64 --load -f containers/worker/Dockerfile -t "$REPO_URI:$TAG" .
aws ecr get-login-password --region "$REGION" | docker login --username AWS --password-stdin "${REPO_URI%%/*}"
docker push "$REPO_URI:$TAG"

python3 - "$ENV_NAME" "$TAG" <<'PY'
import re, sys
env, tag = sys.argv[1], sys.argv[2]
text = open("samconfig.toml").read()
start = text.index(f"[{env}.deploy.parameters]")
end = text.find("\n[", start + 1)
end = len(text) if end < 0 else end
section, n = re.subn(r"WorkerImageTag=\S+?(?=[\s\"])", f"WorkerImageTag={tag}", text[start:end])
if n != 1:
    sys.exit(f"samconfig.toml [{env}.deploy.parameters] needs exactly one WorkerImageTag=... in parameter_overrides")
open("samconfig.toml", "w").write(text[:start] + section + text[end:])
PY
echo "samconfig.toml [$ENV_NAME]: WorkerImageTag=$TAG"
sam build && sam deploy --config-env "$ENV_NAME"
