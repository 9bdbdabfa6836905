#!/usr/bin/env bash
# Build the jupyter box image with podman, offline: a Debian base made here (debootstrap +
# podman import: no registry needed), a wheelhouse built on this machine, then the
# Containerfile with --network=none and --no-cache (every build runs the candy steps, never
# a cached layer of an earlier build). Podman settings for these machines (runc, explicit
# ulimits) come from a containers.conf pointed to by CONTAINERS_CONF.
# Usage: box-image.sh IMAGE [WORKDIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib.sh"
image=${1:?usage: box-image.sh IMAGE [WORKDIR]}
work=$(mkdir -p "${2:-$root/build/box}" && cd "${2:-$root/build/box}" && pwd)
base=${BASE_IMAGE:-localhost/jupyter-mcp-base:bookworm}
if [ -z "${CONTAINERS_CONF:-}" ]; then
    export CONTAINERS_CONF="$work/containers.conf"
    printf '[containers]\ndefault_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]\n[engine]\nruntime = "runc"\n' \
        > "$CONTAINERS_CONF"
fi
if ! podman image exists "$base"; then
    case "$base" in
        localhost/jupyter-mcp-base:*)
            rm -rf "$work/rootfs"
            debootstrap --variant=minbase --include=python3,python3-venv bookworm "$work/rootfs" \
                http://deb.debian.org/debian > "$work/debootstrap.log" 2>&1 || die "debootstrap failed: $work/debootstrap.log"
            tar -C "$work/rootfs" -c . | podman import - "$base" >/dev/null || die "podman import failed"
            rm -rf "$work/rootfs" ;;
        *) die "base image $base is not present (podman pull it first)" ;;
    esac
fi
pyversion=$(podman run --rm "$base" python3 -c 'import platform; print(platform.python_version())') \
    || die "the base image $base has no python3"
WHEELHOUSE_PYTHON=$pyversion bash "$root/scripts/stage-context.sh" "$work/ctx" --wheelhouse >/dev/null
podman build --no-cache --network=none -f "$root/Containerfile" --build-arg BASE_IMAGE="$base" -t "$image" "$work/ctx" \
    > "$work/build.log" 2>&1 || die "podman build failed: $work/build.log"
echo "$image"
