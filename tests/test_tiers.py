"""The test tiers hold (jupyter_mcp/testing/plugin.py): every test is marked exactly one of
``unit`` and ``live``, and a ``unit`` test that asks for a fixture that starts a server or a
process, directly or through another fixture, is a collection error naming it. Checked on
small test files collected by a pytest of their own (collected only: nothing starts)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.unit

PLUGINS = ("-p", "pytest_jupyter.jupyter_server", "-p", "jupyter_mcp.testing.plugin")
SERVERS = ["live", "live_factory", "redis_server", "mcp_url", "mcp_ext", "jp_serverapp", "jp_fetch", "jp_ws_fetch"]

IN_ONE_TIER = {
    "test_unit_list_form": """
import pytest

pytestmark = [pytest.mark.unit, pytest.mark.skipif(False, reason="list form")]

def test_a(): pass

def test_b(tmp_path, monkeypatch): pass
""",
    "test_mixed": """
import pytest

@pytest.mark.unit
def test_fast(): pass

@pytest.mark.live
def test_with_a_server(live): pass

@pytest.mark.live
class TestServers:
    def test_one(self, mcp_url): pass
""",
    "test_kill_matrix": """
import pytest

pytestmark = [pytest.mark.live, pytest.mark.crash]

def test_killed(live_factory): pass
""",
}

WRONG = {
    "test_no_tier": """
import pytest

@pytest.mark.unit
def test_marked(): pass

def test_unmarked(): pass
""",
    "test_both_tiers": """
import pytest

pytestmark = pytest.mark.live

@pytest.mark.unit
def test_both(): pass
""",
    "test_servers": "import pytest\n\npytestmark = pytest.mark.unit\n" + "".join(
        f"\ndef test_asks_for_{name}({name}): pass\n" for name in SERVERS),
    "test_indirect": """
import pytest
from jupyter_mcp.testing.plugin import starts_process

@pytest.fixture
def notebook_on_the_server(live):
    return live

@pytest.fixture(scope="module")
@starts_process
def own_server():
    raise AssertionError("collection starts nothing")

@pytest.fixture
def on_own_server(own_server):
    return own_server

@pytest.mark.unit
def test_through_a_fixture(notebook_on_the_server): pass

@pytest.mark.unit
def test_through_a_marked_fixture(on_own_server): pass

@pytest.mark.live
def test_live_may(on_own_server, notebook_on_the_server): pass
""",
}


def collect(pytester: pytest.Pytester, files: dict[str, str], *args: str) -> pytest.RunResult:
    pytester.makepyfile(**files)
    return pytester.runpytest_inprocess("--collect-only", "-q", "-p", "no:cacheprovider", "--strict-markers",
                                        *PLUGINS, *args)


def test_tests_in_exactly_one_tier_are_collected_and_the_kill_matrix_is_slow(pytester):
    result = collect(pytester, IN_ONE_TIER)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*6 tests collected*"])
    slow = pytester.runpytest_inprocess("--collect-only", "-q", "-p", "no:cacheprovider", *PLUGINS, "-m", "slow")
    slow.stdout.fnmatch_lines(["test_kill_matrix.py::test_killed", "*1/6 tests collected (5 deselected)*"])


def test_a_test_in_no_tier_or_both_or_unit_asking_for_a_server_is_a_collection_error_naming_it(pytester):
    result = collect(pytester, {**IN_ONE_TIER, **WRONG}, "-m", "unit")  # checked before -m deselects
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    result.stderr.fnmatch_lines(["*tests in no tier or the wrong one:*"])
    errors = result.stderr.str()
    expected = [
        "test_no_tier.py::test_unmarked: marked neither unit nor live",
        "test_both_tiers.py::test_both: marked unit and live",
        "test_indirect.py::test_through_a_fixture: marked unit but asks for a fixture that starts a server or a "
        "process (live); mark it live",
        "test_indirect.py::test_through_a_marked_fixture: marked unit but asks for a fixture that starts a server or "
        "a process (own_server); mark it live",
        *(f"test_servers.py::test_asks_for_{name}: marked unit but asks for a fixture that starts" for name in SERVERS),
    ]
    for line in expected:
        assert line in errors, f"{line!r} not in:\n{errors}"
    for name in SERVERS:  # the fixture itself is named, among those it brings
        assert name in errors.split(f"test_asks_for_{name}: ")[1].splitlines()[0].split("(")[1]
    assert len([line for line in errors.splitlines() if line.startswith("  ")]) == len(expected), errors
    for fine in ("test_marked", "test_live_may", "test_unit_list_form", "test_mixed", "test_kill_matrix"):
        assert fine not in errors


def test_this_suite_passes_its_own_check(request):
    """Every test collected in this run is in exactly one tier (the check ran: this test is here)."""
    from jupyter_mcp.testing.plugin import tier_problems

    assert tier_problems(request.session.items) == []
