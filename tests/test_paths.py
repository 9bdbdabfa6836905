"""The path layer: one canonical path per notebook, nothing ever outside the root."""

from __future__ import annotations

import os
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from jupyter_mcp.notebooks.paths import PathError, canonical_path, read_real_file, real_file

pytestmark = pytest.mark.unit


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    (ws / "sub").mkdir(parents=True)
    (ws / "foo.ipynb").write_text("{}")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.ipynb").write_text("{}")
    (ws / "escape").symlink_to(outside)
    (ws / "link.ipynb").symlink_to(outside / "secret.ipynb")
    (ws / "inner").symlink_to(ws / "sub")
    return ws


@pytest.mark.parametrize(
    "variant",
    ["foo.ipynb", "./foo.ipynb", "/foo.ipynb", "sub/../foo.ipynb", ".//foo.ipynb"],
)
def test_variants_converge(root: Path, variant: str) -> None:
    assert canonical_path(str(root), variant) == "foo.ipynb"


def test_root_prefixed_path_converges(root: Path) -> None:
    assert canonical_path(str(root), f"{root}/foo.ipynb") == "foo.ipynb"
    assert canonical_path(str(root), f"{root}/sub/a.ipynb") == "sub/a.ipynb"


def test_workspace_named_root(tmp_path: Path) -> None:
    """With the root at <x>/workspace, '/workspace/foo.ipynb' is the same notebook."""
    ws = tmp_path / "workspace"
    ws.mkdir()
    assert canonical_path(str(ws), str(ws / "foo.ipynb")) == "foo.ipynb"


def test_a_symlink_inside_root_names_the_file_it_leads_to(root: Path) -> None:
    """Every name of one file is one canonical path (so one room): a linked folder and a
    linked notebook both resolve to the real file's path."""
    assert canonical_path(str(root), "inner/x.ipynb") == "sub/x.ipynb"
    (root / "alias.ipynb").symlink_to(root / "foo.ipynb")
    (root / "sub" / "up.ipynb").symlink_to("../foo.ipynb")
    for name in ("alias.ipynb", "sub/up.ipynb", "inner/up.ipynb", "foo.ipynb"):
        assert canonical_path(str(root), name) == "foo.ipynb"
    (root / "data.ipynb").symlink_to(root / "sub")
    with pytest.raises(PathError):
        canonical_path(str(root), "data.ipynb/")


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("../foo.ipynb", "escapes the workspace"),
        ("sub/../../foo.ipynb", "escapes the workspace"),
        ("/../foo.ipynb", "escapes the workspace"),
        ("/etc/passwd.ipynb", "absolute path outside the workspace"),
        ("/tmp/x/y.ipynb", "absolute path outside the workspace"),
        ("escape/secret.ipynb", "resolves outside the workspace"),
        ("link.ipynb", "resolves outside the workspace"),
        ("a\x00b.ipynb", "NUL byte"),
        ("a\nb.ipynb", "control character"),
        ("", "path is empty"),
        ("   ", "path is empty"),
        ("notes.txt", "not a notebook path"),
        ("sub", "not a notebook path"),
        (".ipynb", "not a notebook path"),
        ("/", "names the workspace folder"),
        ("x" * 300 + ".ipynb", "longer than 255 bytes"),
        ("a/" * 3000 + "b.ipynb", "longer than 4096 characters"),
    ],
)
def test_refusals_name_path_and_reason(root: Path, path: str, reason: str) -> None:
    with pytest.raises(PathError) as info:
        canonical_path(str(root), path)
    message = str(info.value)
    assert reason in message
    assert repr(path)[:60] in message  # the path is named


def test_refusal_of_root_prefixed_escape(root: Path) -> None:
    with pytest.raises(PathError, match="escapes the workspace"):
        canonical_path(str(root), f"{root}/../outside/secret.ipynb")


@pytest.mark.parametrize("bad", [None, 3, ["a.ipynb"], {"p": 1}])
def test_non_string_refused(root: Path, bad: object) -> None:
    with pytest.raises(PathError, match="must be a string"):
        canonical_path(str(root), bad)


def test_folders(root: Path) -> None:
    for empty in ("", "/", ".", "./"):
        assert canonical_path(str(root), empty, notebook=False) == ""
    assert canonical_path(str(root), "/sub/", notebook=False) == "sub"
    with pytest.raises(PathError, match="escapes"):
        canonical_path(str(root), "..", notebook=False)


# --- property-based fuzz ---------------------------------------------------

SEGMENTS = st.sampled_from(["..", ".", "", "sub", "escape", "inner", "link.ipynb", "foo.ipynb", "x.ipynb", "~",
                            "etc", "tmp", "workspace", "outside"])
TEXT = st.text(alphabet=string.printable + "éü☃\u202e", max_size=12)


@st.composite
def hostile_paths(draw, root: str) -> str:
    parts = draw(st.lists(st.one_of(SEGMENTS, TEXT), max_size=8))
    path = "/".join(parts)
    prefix = draw(st.sampled_from(["", "/", "./", root + "/", root + "/../", "//", "\\"]))
    suffix = draw(st.sampled_from(["", ".ipynb", "/x.ipynb", "/../x.ipynb"]))
    return prefix + path + suffix


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), notebook=st.booleans())
def test_fuzz_no_accepted_path_leaves_the_root(root: Path, data, notebook: bool) -> None:
    candidate = data.draw(hostile_paths(str(root)))
    try:
        canonical = canonical_path(str(root), candidate, notebook=notebook)
    except PathError as exc:
        assert exc.reason and exc.reason in str(exc)
        return
    real_root = os.path.realpath(root)
    resolved = os.path.realpath(os.path.join(root, canonical))
    assert resolved == real_root or resolved.startswith(real_root + os.sep), (candidate, canonical)
    assert not canonical.startswith("/") and ".." not in canonical.split("/")
    # Canonical is a fixed point: feeding it back gives itself.
    assume(canonical or not notebook)
    assert canonical_path(str(root), canonical, notebook=notebook) == canonical


# --- the file itself (real_file, read_real_file) ----------------------------

def test_real_file_is_the_workspace_own_single_named_regular_file(root: Path) -> None:
    assert real_file(str(root), "foo.ipynb").st_size == 2
    assert read_real_file(str(root), "foo.ipynb") == b"{}"
    assert real_file(str(root), "sub/missing.ipynb") is None


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda ws, out: os.link(out / "secret.ipynb", ws / "x.ipynb"), "2 hard links"),
        (lambda ws, out: (ws / "x.ipynb").symlink_to(out / "secret.ipynb"), "leads through a symlink"),
        (lambda ws, out: (ws / "x.ipynb").symlink_to(ws / "foo.ipynb"), "leads through a symlink"),
        (lambda ws, out: (ws / "d").symlink_to(out), "leads through a symlink"),
        (lambda ws, out: os.mkfifo(ws / "x.ipynb"), "not a regular file"),
        (lambda ws, out: (ws / "x.ipynb").mkdir(), "not a regular file"),
    ],
    ids=["hard link", "symlink out", "symlink in", "folder symlink", "fifo", "folder"],
)
def test_real_file_refuses_what_the_contents_manager_would_follow(root: Path, make, reason: str) -> None:
    """Canonical paths hold no symlink, so one found there was swapped in after the check;
    a second hard link may be a file outside the workspace."""
    make(root, root.parent / "outside")
    name = "d/secret.ipynb" if (root / "d").is_symlink() else "x.ipynb"
    for check in (real_file, read_real_file):
        with pytest.raises(PathError, match=reason):
            check(str(root), name)
