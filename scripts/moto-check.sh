#!/bin/sh
# make moto-check: does the newest moto on PyPI still need each of the local cloud's patches?
# A scratch virtualenv (kept between runs, upgraded each time) holds the newest moto (or MOTO_CHECK_VERSION) and
# the locked boto3, botocore and s3transfer (constraints.txt: the client the app runs with; an unpinned one made
# the athena-results probe fail for a reason no patch has: botocore 1.44.18 moved Athena to rest-json, which
# moto 5.2.6 cannot route), nothing else of seqlake's pins; this checkout's localcloud/src/ is on PYTHONPATH for
# the registry and its probes, which import nothing outside the local cloud (localcloud/src/localcloud/:
# patch_registry.py, moto_probes.py, moto_check.py).
# Prints one line per patch (needed / gone / review); exits 1 if one needs review.
set -eu
PYTHON=${PYTHON:-python3}
VENV=${MOTO_CHECK_VENV:-${TMPDIR:-/tmp}/seqlake-moto-check}
EXTRAS="server,s3,stepfunctions,batch,glue,athena,events,iam,logs,sqs,ecr"
test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
cd "$(dirname "$0")/.."
CLIENT=$(grep -E '^(boto3|botocore|s3transfer)==' constraints.txt)
# shellcheck disable=SC2086  # one requirement per word
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade \
    "moto[$EXTRAS]${MOTO_CHECK_VERSION:+==$MOTO_CHECK_VERSION}" $CLIENT
PYTHONPATH=localcloud/src exec "$VENV/bin/python" -m localcloud.moto_check
