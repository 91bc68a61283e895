"""Child processes that end with their parent.

A command that trains in a subprocess (``ablation``, ``reproduce``, the shipped models' recipes)
must not leave that training running when it is itself stopped: ``SIGTERM`` or ``SIGHUP`` to
the parent ends a Python process at once, and ``subprocess.run`` then never reaches the code
that would stop its child, which keeps training (and holding its run folder's lock) beside
whatever runs next. ``run_child`` passes those signals on to the child, waits for it, and then
exits as it was told. Ctrl-C reaches the whole foreground process group, the child included;
``run_child`` waits for the child to finish its own Ctrl-C handling before re-raising.
"""

from __future__ import annotations

import signal
import subprocess
import threading

#: Seconds a child gets to end after a forwarded signal before it is killed.
GRACE_SECONDS = 60.0
_FORWARDED = ("SIGTERM", "SIGHUP")


def run_child(cmd: list[str], **popen_kwargs) -> int:
    """Runs ``cmd`` (``subprocess.Popen`` arguments) to its end → its exit status.

    While it runs, ``SIGTERM`` and ``SIGHUP`` to this process (those not ignored, as ``nohup``
    ignores ``SIGHUP``) are sent on to the child; once
    the child has ended (or was killed after ``GRACE_SECONDS``), this process exits with
    ``SystemExit(128 + signal)``. Outside the main thread no handler can be set, and the
    child is run as ``subprocess.run`` would.

    Raises:
      SystemExit: a forwarded signal (status 128 + its number).
      KeyboardInterrupt: Ctrl-C, after the child has ended.
    """
    proc = subprocess.Popen(cmd, **popen_kwargs)
    previous, received = {}, []

    def forward(signum, frame):
        # Only signal here: the interrupted proc.wait() below holds Popen's wait lock, and
        # resumes (PEP 475) until the child has ended.
        received.append(signum)
        proc.send_signal(signum)
        killer = threading.Timer(GRACE_SECONDS, proc.kill)
        killer.daemon = True
        killer.start()

    if threading.current_thread() is threading.main_thread():
        for name in _FORWARDED:
            # A signal this process ignores (e.g. SIGHUP under nohup) stays ignored: the child
            # inherits that, and the command must keep surviving it.
            if hasattr(signal, name) and signal.getsignal(getattr(signal, name)) is signal.SIG_DFL:
                sig = getattr(signal, name)
                previous[sig] = signal.signal(sig, forward)
    try:
        status = proc.wait()
    except KeyboardInterrupt:
        _wait(proc)
        raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if proc.poll() is None:  # an exception other than ours: never leave the child behind
            proc.kill()
            proc.wait()
    if received:
        raise SystemExit(128 + received[0])
    return status


def _wait(proc: subprocess.Popen) -> None:
    try:
        proc.wait(timeout=GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
