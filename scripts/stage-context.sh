#!/usr/bin/env bash
# Assemble the candy's build context (what charly mounts at /ctx): the install scripts,
# the charly files, and the jupyter-mcp wheel in dist/. With --wheelhouse, also every
# wheel the install needs (parent stand-in and runtime), so a build can run offline.
# Usage: stage-context.sh OUT [--wheelhouse]
#   WHEELHOUSE_PYTHON=3.11.2 picks wheels for the image's Python rather than this one.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib.sh"
out=${1:?usage: stage-context.sh OUT [--wheelhouse]}
python=${PYTHON:-python3}
rm -rf "$out/scripts" "$out/dist" "$out/checks" "$out/candy"
mkdir -p "$out/dist"
cp -r "$root/scripts" "$out/scripts"
mkdir -p "$out/candy" && cp -r "$root/candy/jupyter-mcp" "$out/candy/" && cp "$root/charly.yml" "$out/"
mkdir -p "$out/checks" && cp "$root/checks/"*.py "$root/checks/"*.yml "$root/checks/"*.json "$out/checks/"
"$python" -m pip wheel --disable-pip-version-check -q --no-deps -w "$out/dist" "$root" >/dev/null \
    || die "building the jupyter-mcp wheel failed"
if [ "${2:-}" = --wheelhouse ]; then
    mkdir -p "$out/wheelhouse"
    target=()
    if [ -n "${WHEELHOUSE_PYTHON:-}" ]; then target=(--only-binary=:all: --python-version "$WHEELHOUSE_PYTHON"); fi
    "$python" -m pip download --disable-pip-version-check -q -d "$out/wheelhouse" "${target[@]}" \
        -r "$root/scripts/runtime-requirements.txt" "jupyterlab>=4.4,<5" "jupyter-collaboration>=5,<6" pyyaml \
        || die "downloading the wheelhouse failed"
    cp "$out/dist/"*.whl "$out/wheelhouse/"
fi
echo "$out"
