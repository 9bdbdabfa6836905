"""What the server changes in its whole process (jupyter_mcp/process.py): each measure on by
default, and each one's setting turning it off leaves the process as it was."""

from __future__ import annotations

import gc
import signal
from types import SimpleNamespace

import pytest

from jupyter_mcp import process
from jupyter_mcp.app import JupyterMCPApp
from jupyter_mcp.process import ProcessMeasures

pytestmark = pytest.mark.unit

SETTINGS = ("freeze_startup_objects", "sigint_stops_server", "end_idle_worker_threads")


@pytest.fixture
def watched(monkeypatch):
    """What the measures would change, recorded instead of changed: the SIGINT handler is set back
    to Python's default for the test, and gc.freeze and the exit hook are counted."""
    calls = {"freeze": 0, "exit hooks": []}
    monkeypatch.setattr(gc, "get_freeze_count", lambda: 0)
    monkeypatch.setattr(gc, "freeze", lambda: calls.__setitem__("freeze", calls["freeze"] + 1))
    monkeypatch.setattr(process, "before_threads_are_joined", calls["exit hooks"].append)
    monkeypatch.setattr(process, "_exit_hooked", False)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield calls
    finally:
        signal.signal(signal.SIGINT, before)


def stop(sig, frame):  # the server's own stop handler, as the adapter finds it
    pass


SERVERAPP = SimpleNamespace(_signal_stop=stop)


def test_the_measures_are_on_by_default(watched):
    app = JupyterMCPApp()
    assert all(getattr(app, name) is True for name in SETTINGS)
    measures = ProcessMeasures(**{name: getattr(app, name) for name in SETTINGS})
    assert measures == ProcessMeasures()
    measures.at_setup(SERVERAPP)
    measures.at_start()
    assert signal.getsignal(signal.SIGINT) is stop
    assert watched == {"freeze": 1, "exit hooks": [process.end_idle_worker_threads]}


@pytest.mark.parametrize("off", SETTINGS)
def test_each_measure_turned_off_leaves_the_process_untouched(watched, off):
    measures = ProcessMeasures(**{off: False})
    measures.at_setup(SERVERAPP)
    measures.at_start()
    assert (signal.getsignal(signal.SIGINT) is signal.default_int_handler) == (off == "sigint_stops_server")
    assert (watched["freeze"] == 0) == (off == "freeze_startup_objects")
    assert (watched["exit hooks"] == []) == (off == "end_idle_worker_threads")


def test_all_off_changes_nothing(watched):
    ProcessMeasures(False, False, False).at_setup(SERVERAPP)
    ProcessMeasures(False, False, False).at_start()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert watched == {"freeze": 0, "exit hooks": []}


def test_a_sigint_handler_someone_else_installed_is_left(watched):
    def theirs(sig, frame):
        pass

    signal.signal(signal.SIGINT, theirs)
    ProcessMeasures().at_setup(SERVERAPP)
    assert signal.getsignal(signal.SIGINT) is theirs


def test_the_settings_read_on_the_command_line():
    app = JupyterMCPApp()
    app.parse_command_line(["--JupyterMCPApp.freeze_startup_objects=False", "--JupyterMCPApp.sigint_stops_server=False",
                            "--JupyterMCPApp.end_idle_worker_threads=False"])
    assert not any(getattr(app, name) for name in SETTINGS)
