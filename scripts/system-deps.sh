# Sourced by scripts/test: the Debian packages the test suite runs for real: redis-server
# (the Redis task store), podman with runc and debootstrap (the container box), chromium
# (the browser tests; never a downloaded browser), Node.js (the MCP Inspector CLI, and
# configurable-http-proxy for the JupyterHub tests), and nginx and socat (relays in front of
# the box's identity provider).
# Installed only when missing; needs root (CI runs as root) or passwordless sudo.
need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v podman >/dev/null 2>&1 || need+=(podman uidmap slirp4netns)
command -v runc >/dev/null 2>&1 || need+=(runc)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v npm >/dev/null 2>&1 || need+=(nodejs npm)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx)
command -v socat >/dev/null 2>&1 || need+=(socat)
if [ ${#need[@]} -gt 0 ]; then
    sudo_cmd=()
    if [ "$(id -u)" != 0 ]; then sudo_cmd=(sudo -n); fi
    echo "scripts/test: installing ${need[*]} (apt-get)" >&2
    "${sudo_cmd[@]}" apt-get update -qq >/dev/null 2>&1 || true
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
