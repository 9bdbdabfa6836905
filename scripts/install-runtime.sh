#!/usr/bin/env bash
# Candy step: install the runtime dependency (fastmcp) into the parent's environment.
# Usage: install-runtime.sh PYTHON        (offline when WHEELHOUSE is set)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
python=${1:?usage: install-runtime.sh PYTHON}
pip_install "$python" -r "$here/runtime-requirements.txt"
"$python" -c "import fastmcp, mcp" || die "fastmcp is not importable after installing it"
