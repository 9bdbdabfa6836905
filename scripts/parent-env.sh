#!/usr/bin/env bash
# Stand-in for the parent image (the `jupyter` box's base): a Python environment with
# JupyterLab and jupyter-collaboration, at ENV_DIR (the parent uses ~/.pixi/envs/default).
# Usage: parent-env.sh ENV_DIR    (offline when WHEELHOUSE is set)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
env_dir=${1:?usage: parent-env.sh ENV_DIR}
if [ ! -x "$env_dir/bin/python" ]; then
    "${PYTHON:-python3}" -m venv "$env_dir" || die "cannot create a virtual environment at $env_dir"
fi
pip_install "$env_dir/bin/python" "jupyterlab>=4.4,<5" "jupyter-collaboration>=5,<6"
"$env_dir/bin/python" -c "import jupyterlab, jupyter_server_ydoc" || die "the parent environment is incomplete"
