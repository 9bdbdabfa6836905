# Sourced by scripts/serve and scripts/test: make sure the project's virtual environment
# exists with jupyter-mcp installed (editable) and what the chosen extras need.
#   . scripts/dev-env.sh            the product: jupyter-mcp + JupyterLab
#   . scripts/dev-env.sh test       also everything the test suite needs
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${JUPYTER_MCP_VENV:-$here/.venv}
extras=${1:-}
if [ ! -x "$VENV/bin/python" ]; then
    "${PYTHON:-python3}" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip
fi
spec="$here"
if [ "$extras" = test ]; then spec="$here[test]"; fi
stamp="$VENV/.jupyter-mcp-${extras:-run}.stamp"
if [ ! -f "$stamp" ] || [ "$here/pyproject.toml" -nt "$stamp" ]; then
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e "$spec" "jupyterlab>=4.4,<5" 2>&1 \
        | grep -v "^WARNING: Location" || true
    "$VENV/bin/python" -c "import jupyter_mcp, jupyterlab" # fail loudly if the install did not take
    touch "$stamp"
fi
export PATH="$VENV/bin:$PATH"
