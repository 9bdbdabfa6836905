#!/usr/bin/env bash
# The box's JupyterLab service, started as the parent `jupyter` candy starts it:
# jupyter lab on 0.0.0.0:8888 with the workspace as its root. The token comes from
# JUPYTER_TOKEN_FILE or JUPYTER_TOKEN; with neither, one is made and written to
# ~/.local/share/jupyter-mcp/token (the MCP endpoint is never left open).
# Usage: serve-box.sh [PYTHON]   (env: WORKSPACE=/workspace, JUPYTER_PORT=8888, JUPYTER_IP=0.0.0.0)
set -euo pipefail
python=${1:-$HOME/.pixi/envs/default/bin/python}
workspace=${WORKSPACE:-/workspace}
if [ -n "${JUPYTER_TOKEN_FILE:-}" ]; then
    JUPYTER_TOKEN=$(cat "$JUPYTER_TOKEN_FILE")
elif [ -z "${JUPYTER_TOKEN:-}" ]; then
    mkdir -p "$HOME/.local/share/jupyter-mcp"
    JUPYTER_TOKEN=$("$python" -c 'import secrets; print(secrets.token_hex(24))')
    (umask 077; echo "$JUPYTER_TOKEN" > "$HOME/.local/share/jupyter-mcp/token")
    echo "jupyter-mcp: no token given; wrote one to $HOME/.local/share/jupyter-mcp/token" >&2
fi
export JUPYTER_TOKEN
mkdir -p "$workspace"
root_flag=()
if [ "$(id -u)" = 0 ]; then root_flag=(--allow-root); fi
exec "$python" -m jupyterlab --no-browser --ip="${JUPYTER_IP:-0.0.0.0}" --port="${JUPYTER_PORT:-8888}" \
    --ServerApp.port_retries=0 --notebook-dir="$workspace" \
    --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate "${root_flag[@]}"
