# Shared by the install steps. Sourced, never run.
die() { echo "jupyter-mcp: $*" >&2; exit 1; }

# pip_install PYTHON ARGS...: pip from that environment; offline from $WHEELHOUSE when set.
pip_install() {
    local python=$1; shift
    [ -x "$python" ] || die "no Python at $python (is the parent environment there?)"
    local offline=()
    if [ -n "${WHEELHOUSE:-}" ]; then
        [ -d "$WHEELHOUSE" ] || die "WHEELHOUSE=$WHEELHOUSE is not a directory"
        offline=(--no-index --find-links "$WHEELHOUSE")
    fi
    "$python" -m pip install --disable-pip-version-check --no-input -q "${offline[@]}" "$@" \
        || die "pip install $* failed in $python"
}
