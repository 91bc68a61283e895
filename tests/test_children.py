"""A command that trains in a subprocess stops that training when it is itself stopped."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

PARENT = textwrap.dedent("""
    import sys
    from grounded_text.utils.children import run_child
    child = [sys.executable, "-c", "import os, sys, time; print(os.getpid(), flush=True); time.sleep(300)"]
    sys.exit(run_child(child))
""")


def _default_signals():
    # The test may itself run under nohup (SIGHUP ignored, inherited by every child).
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def _start(tmp_path, ignore_hangup=False):
    out = tmp_path / "child_pid"
    with open(out, "w") as f:
        parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=f, preexec_fn=(
            (lambda: (_default_signals(), signal.signal(signal.SIGHUP, signal.SIG_IGN))) if ignore_hangup
            else _default_signals))
    for _ in range(300):
        if out.read_text().strip():
            return parent, int(out.read_text().split()[0])
        time.sleep(0.05)
    parent.kill()
    raise AssertionError("the child never started")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (ended, not yet reaped by its new parent) counts as ended.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_stopped_parent_stops_its_child_and_exits_as_told(tmp_path, sig):
    parent, child = _start(tmp_path)
    assert _alive(child)
    parent.send_signal(sig)
    assert parent.wait(timeout=30) == 128 + sig
    deadline = time.time() + 10
    while _alive(child) and time.time() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the child outlived its parent"


def test_an_ignored_hangup_stays_ignored(tmp_path):
    """Under nohup a hangup must not stop the command (nor its child)."""
    parent, child = _start(tmp_path, ignore_hangup=True)
    try:
        parent.send_signal(signal.SIGHUP)
        time.sleep(1.0)
        assert parent.poll() is None and _alive(child)
    finally:
        parent.send_signal(signal.SIGTERM)
        assert parent.wait(timeout=30) == 128 + signal.SIGTERM


def test_plain_subprocess_run_would_orphan_the_child(tmp_path):
    """The failure mode run_child exists for (so that the test above can fail)."""
    script = PARENT.replace("from grounded_text.utils.children import run_child", "import subprocess").replace(
        "sys.exit(run_child(child))", "sys.exit(subprocess.run(child).returncode)")
    out = tmp_path / "child_pid"
    with open(out, "w") as f:
        parent = subprocess.Popen([sys.executable, "-c", script], stdout=f, preexec_fn=_default_signals)
    for _ in range(300):
        if out.read_text().strip():
            break
        time.sleep(0.05)
    child = int(out.read_text().split()[0])
    parent.send_signal(signal.SIGTERM)
    parent.wait(timeout=30)
    time.sleep(0.5)
    try:
        assert _alive(child)
    finally:
        os.kill(child, signal.SIGKILL)


def test_the_exit_status_is_the_childs(tmp_path):
    from grounded_text.utils.children import run_child

    assert run_child([sys.executable, "-c", "import sys; sys.exit(3)"]) == 3
    assert run_child([sys.executable, "-c", "pass"]) == 0
