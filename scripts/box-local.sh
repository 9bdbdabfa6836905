#!/usr/bin/env bash
# The local box: a fresh environment standing in for the parent image, the candy's run
# steps applied to it (the same scripts charly and the Containerfile use), and JupyterLab
# started as the parent candy's service starts it. Leaves it running; prints its PID.
# Usage: box-local.sh BOX_DIR [PORT]     (env: JUPYTER_TOKEN, else one is made)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib.sh"
box=$(mkdir -p "${1:?usage: box-local.sh BOX_DIR [PORT]}" && cd "$1" && pwd)
port=${2:-8888}
home="$box/home"
env_dir="$home/.pixi/envs/default"
bash "$root/scripts/parent-env.sh" "$env_dir"
bash "$root/scripts/stage-context.sh" "$box/ctx" >/dev/null
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
runner="$env_dir/bin/python -m checks"   # the parent environment has PyYAML (jupyter-events needs it)
$runner apply "$root/candy/jupyter-mcp/charly.yml" --home "$home" --ctx "$box/ctx"
token=${JUPYTER_TOKEN:-$("$env_dir/bin/python" -c 'import secrets; print(secrets.token_hex(24))')}
echo "$token" > "$box/token"
mkdir -p "$box/workspace"
# The local box runs on this machine, not in a container: its deployment is this machine's
# loopback (in a container it is also the container's networks; here those would be a LAN).
mkdir -p "$home/.jupyter"
printf '{"DeploymentIdentityProvider": {"trusted_networks": ["loopback"]}}\n' > "$home/.jupyter/jupyter_server_config.json"
cd "$home"  # jupyter-collaboration keeps its update store (.jupyter_ystore.db) in the working directory
HOME="$home" JUPYTER_CONFIG_DIR="$home/.jupyter" JUPYTER_TOKEN="$token" $runner serve "$root/charly.yml" --home "$home" \
    --volume "/workspace=$box/workspace" --url "http://127.0.0.1:$port" > "$box/jupyter.log" 2>&1 &
echo $! > "$box/pid"
echo "local box: http://127.0.0.1:$port (token in $box/token, log $box/jupyter.log, pid $(cat "$box/pid"))"
