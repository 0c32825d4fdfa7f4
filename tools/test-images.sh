#!/usr/bin/env bash
# The container test hosts' base images, one per Debian suite (default: the two the collection is
# tested on). Each is built by base-image.sh (tag = hash of its recipe) and also tagged
# inferops-gpu/base:<suite>, the name the molecule scenarios use: they then need no variable from
# make, and `molecule test -s NAME` from a shell with the tool venv works on its own.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
"$here/docker-engine.sh" >&2
for suite in "${@:-bookworm trixie}"; do
  for s in $suite; do
    tag=$(BASE_IMAGE_SUITE=$s "$here/base-image.sh")
    docker tag "$tag" "inferops-gpu/base:$s"
  done
done
