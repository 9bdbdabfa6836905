#!/usr/bin/env bash
# Candy step: install the jupyter-mcp distribution with --no-deps (the parent already has
# JupyterLab; install-runtime.sh brought fastmcp).
# Usage: install-extension.sh PYTHON SOURCE   (SOURCE: a wheel, a folder holding one, or the source tree)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
python=${1:?usage: install-extension.sh PYTHON SOURCE}
source=${2:?usage: install-extension.sh PYTHON SOURCE}
if [ -d "$source" ] && [ ! -f "$source/pyproject.toml" ]; then
    wheel=$(ls -1 "$source"/jupyter_mcp-*.whl 2>/dev/null | sort -V | tail -n 1)
    [ -n "$wheel" ] || die "no jupyter_mcp wheel in $source"
    source=$wheel
fi
[ -e "$source" ] || die "no jupyter-mcp distribution at $source"
if [ -f "$source/pyproject.toml" ]; then
    # building from the tree needs its build backend; offline it must be in the wheelhouse
    pip_install "$python" --no-deps --force-reinstall "$source"
else
    WHEELHOUSE= pip_install "$python" --no-deps --force-reinstall "$source"
fi
"$python" -c "import jupyter_mcp" || die "jupyter_mcp is not importable after installing it"
