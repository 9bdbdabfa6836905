# Sourced by tasks/test: the Debian packages the test suite runs for real
# (redis-server for the Redis task store). Installed only when missing; needs root
# (CI runs as root) or passwordless sudo.
need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
if [ ${#need[@]} -gt 0 ]; then
    sudo_cmd=()
    if [ "$(id -u)" != 0 ]; then sudo_cmd=(sudo -n); fi
    echo "tasks/test: installing ${need[*]} (apt-get)" >&2
    "${sudo_cmd[@]}" apt-get update -qq >/dev/null 2>&1 || true
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
