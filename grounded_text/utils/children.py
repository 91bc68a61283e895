"""Child processes that end with their parent.

A command that trains in a subprocess (``ablation``, ``reproduce``, the shipped models' recipes)
must not leave that training running when it is itself stopped: ``SIGTERM`` or ``SIGHUP`` to
the parent ends a Python process at once, and ``subprocess.run`` then never reaches the code
that would stop its child, which keeps training (and holding its run folder's lock) beside
whatever runs next. ``run_child`` passes those signals on to the child, waits for it, and then
exits as it was told.

Ctrl-C at a terminal reaches the whole foreground process group, the child included: the child
then handles its own, and ``run_child`` waits for it before raising ``KeyboardInterrupt``. A
``SIGINT`` that reaches this process alone (``kill -INT``, or any ``SIGINT`` when this process is
not a terminal's foreground job) is passed on to the child the same way.

``SIGKILL`` cannot be caught: on Linux the child asks the kernel (``prctl(PR_SET_PDEATHSIG)``)
for a ``SIGTERM`` when its parent dies, so a killed command never leaves its training behind
(holding its run folder's lock).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
import threading

#: Seconds a child gets to end after a forwarded signal before it is killed.
GRACE_SECONDS = 60.0
_FORWARDED = ("SIGTERM", "SIGHUP")
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _parent_death_signal():
    """A ``preexec_fn`` that makes the child receive ``SIGTERM`` when this process dies (Linux),
    or None where that is not available. libc is looked up here, before the fork: the child
    then only calls into it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec():
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the request took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


def _terminal_foreground() -> bool:
    """Whether this process is in its terminal's foreground process group (a Ctrl-C there
    reaches its children in the same group too)."""
    for fd in (0, 1, 2):
        try:
            if os.isatty(fd):
                return os.tcgetpgrp(fd) == os.getpgrp()
        except OSError:
            continue
    return False


def run_child(cmd: list[str], **popen_kwargs) -> int:
    """Runs ``cmd`` (``subprocess.Popen`` arguments) to its end → its exit status.

    While it runs, ``SIGTERM`` and ``SIGHUP`` to this process (those not ignored, as ``nohup``
    ignores ``SIGHUP``) are sent on to the child; once
    the child has ended (or was killed after ``GRACE_SECONDS``), this process exits with
    ``SystemExit(128 + signal)``. ``SIGINT`` (when Python's own handler is in place) is sent on
    too, unless this process is its terminal's foreground job and the child shares its process
    group (a Ctrl-C there has reached the child already); once the child has ended,
    ``KeyboardInterrupt`` is raised. On Linux the child gets ``SIGTERM`` if this process dies
    (``PR_SET_PDEATHSIG``), so even ``SIGKILL`` leaves no child behind. Outside the main thread
    no handler can be set, and the child is run as ``subprocess.run`` would.

    Raises:
      SystemExit: a forwarded signal (status 128 + its number).
      KeyboardInterrupt: Ctrl-C or another ``SIGINT``, after the child has ended.
    """
    main_thread = threading.current_thread() is threading.main_thread()
    # Only from the main thread: the kernel signals the child when the thread that started it
    # ends, and a worker thread may end long before the process.
    if main_thread and "preexec_fn" not in popen_kwargs:
        popen_kwargs["preexec_fn"] = _parent_death_signal()
    proc = subprocess.Popen(cmd, **popen_kwargs)
    previous, received, interrupted = {}, [], []

    def kill_later():
        killer = threading.Timer(GRACE_SECONDS, proc.kill)
        killer.daemon = True
        killer.start()

    def forward(signum, frame):
        # Only signal here: the interrupted proc.wait() below holds Popen's wait lock, and
        # resumes (PEP 475) until the child has ended.
        received.append(signum)
        proc.send_signal(signum)
        kill_later()

    def interrupt(signum, frame):
        if interrupted:
            return  # one interruption is passed on once
        interrupted.append(signum)
        shared_group = popen_kwargs.get("process_group") is None and not popen_kwargs.get("start_new_session")
        if not (shared_group and _terminal_foreground()):
            proc.send_signal(signal.SIGINT)
        kill_later()

    if main_thread:
        for name in _FORWARDED:
            # A signal this process ignores (e.g. SIGHUP under nohup) stays ignored: the child
            # inherits that, and the command must keep surviving it.
            if hasattr(signal, name) and signal.getsignal(getattr(signal, name)) is signal.SIG_DFL:
                sig = getattr(signal, name)
                previous[sig] = signal.signal(sig, forward)
        # An ignored SIGINT (a background job of a non-interactive shell) stays ignored too.
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            previous[signal.SIGINT] = signal.signal(signal.SIGINT, interrupt)
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
    if interrupted:
        raise KeyboardInterrupt
    return status


def _wait(proc: subprocess.Popen) -> None:
    try:
        proc.wait(timeout=GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
