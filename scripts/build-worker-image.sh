#!/usr/bin/env bash
# Build the worker image with podman, on a machine with no Docker and no registry access (`make image`).
#
#   scripts/build-worker-image.sh                 build, or fail saying why
#   scripts/build-worker-image.sh --if-possible   build where podman works; otherwise say why and exit 0
#                                                 (`make test`: the container tests then skip, naming why)
#
# The Dockerfile's default base is the public python:*-slim image used on AWS. Here it is a base made once
# from Debian's packages and kept in podman's image store (localhost/seqlake-python): debootstrap's minbase
# with python3, python3-venv and python3-dev (python:*-slim has the headers too), shaped like python:*-slim (a virtualenv first on PATH gives `python` and
# a `pip` free to install). The worker image is tagged with the digest of the files it is built from
# (python -m seqlake.local.image), which is how `seqlake local run --containers` finds the image
# of this checkout. Needs root (debootstrap, podman's store), podman, runc and debootstrap.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
IF_POSSIBLE=0
[[ "${1:-}" == "--if-possible" ]] && IF_POSSIBLE=1
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$ROOT/containers/worker/containers.conf}"
# Debian's release whose python3 has the AWS base image's minor version (python:3.13-slim: trixie, 3.13)
SUITE="${SEQLAKE_BASE_SUITE:-trixie}"
BASE="localhost/seqlake-python:${SUITE}"

fail() {
  echo "error: cannot build the worker image: $1" >&2
  exit 1
}

# what the machine lacks (the build itself failing is an error, --if-possible or not)
skip() {
  if [[ $IF_POSSIBLE == 1 ]]; then
    echo "note: the worker image is not built ($1); the container tests will skip" >&2
    exit 0
  fi
  fail "$1"
}

command -v podman >/dev/null || skip "podman is not installed (apt-get install podman runc debootstrap)"
podman info >/dev/null 2>&1 || skip "podman does not work here: $(podman info 2>&1 | tail -1)"

# the Debian mirror apt on this machine uses (a deb822 .sources file or a one-line sources.list)
mirror() {
  local uri
  uri="$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | grep -v security | head -1 || true)"
  [[ -n "$uri" ]] || uri="$(grep -hs '^deb ' /etc/apt/sources.list | awk '{print $2}' | grep -v security | head -1 || true)"
  echo "${uri:-http://deb.debian.org/debian}"
}

if ! podman image exists "$BASE"; then
  command -v debootstrap >/dev/null || skip "debootstrap is not installed, and the base $BASE is not built"
  [[ "$(id -u)" == 0 ]] || skip "not root: debootstrap needs root to make the base $BASE"
  ROOTFS="$(mktemp -d)"
  trap 'rm -rf "$ROOTFS"' EXIT
  echo "making the base image $BASE from Debian $SUITE ($(mirror)), once" >&2
  debootstrap --variant=minbase --include=python3,python3-venv,python3-dev "$SUITE" "$ROOTFS" "$(mirror)" >/dev/null \
    || fail "debootstrap $SUITE from $(mirror) failed"
  chroot "$ROOTFS" python3 -m venv /opt/venv
  # what python:*-slim leaves out too: downloaded packages, package lists, documentation, Python's static
  # libraries (extensions link to nothing static; other static libraries stay: -lpthread needs its stub)
  rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/* \
         "$ROOTFS"/usr/share/doc/* "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/locale/*
  find "$ROOTFS"/usr/lib -name 'libpython3*.a' -delete
  tar -C "$ROOTFS" -c . | podman import \
    --change 'ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["python3"]' - "$BASE" >/dev/null || fail "podman import of the base failed"
fi

IMAGE="$("$PYTHON" -m seqlake.local.image --image)"
# pip inside the build trusts what pip here trusts (a TLS-intercepting proxy's CA, for one)
CA="${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}"
SECRET=()
[[ -s "$CA" ]] && SECRET=(--secret "id=pip_cert,src=$CA")
LOG="$(mktemp -t seqlake-image-build.XXXXXX.log)"
echo "building $IMAGE on $BASE (output in $LOG)" >&2
podman build --network host --build-arg "PYTHON_IMAGE=$BASE" --build-arg "SEQLAKE_SOURCE_DIGEST=${IMAGE##*:}" \
  "${SECRET[@]}" \
  -f containers/worker/Dockerfile --ignorefile containers/worker/Dockerfile.dockerignore \
  -t "$IMAGE" . >"$LOG" 2>&1 || { tail -40 "$LOG" >&2; fail "podman build failed (the end of $LOG is above)"; }
echo "$IMAGE: $(( $(podman image inspect --format '{{.Size}}' "$IMAGE") / 1000000 )) MB"
