#!/usr/bin/env bash
# Candy step: enable the extension with a jupyter_server_config.d drop-in in the parent's
# environment (<prefix>/etc/jupyter/jupyter_server_config.d/jupyter_mcp.json).
# Usage: enable-extension.sh PYTHON
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
python=${1:?usage: enable-extension.sh PYTHON}
[ -x "$python" ] || die "no Python at $python"
"$python" -m jupyter server extension enable --sys-prefix jupyter_mcp >/dev/null \
    || die "jupyter server extension enable failed"
prefix=$("$python" -c 'import sys; print(sys.prefix)')
dropin="$prefix/etc/jupyter/jupyter_server_config.d/jupyter_mcp.json"
grep -q '"jupyter_mcp": true' "$dropin" || die "$dropin does not enable jupyter_mcp"
