"""SIGINT and SIGTERM: a command either finishes or writes nothing (issue 18).

The CLI runs every command inside :func:`handled`: SIGINT (Ctrl-C) and SIGTERM (``kill``, a
job scheduler) both raise :class:`~ddtree_bayes.core.errors.Interrupted`, a
``KeyboardInterrupt``, wherever the main thread is; the writers remove their temp files on
the way out and ``main`` prints one line and exits 130.

An interrupt can be lost on its way up: raised inside a ``__del__`` (llvmlite's, while numba
compiles) Python prints "Exception ignored in ..." and carries on; nutpie and PyMC catch
``KeyboardInterrupt`` while they sample and return the partial trace. So an interrupt keeps
knocking until it is answered: every :data:`KNOCK_S` seconds, until the command ends or
publishes its work, the signal is sent to the main thread again (and an ``Interrupted`` lost
in a ``__del__`` is not printed). Every signal is also recorded: :func:`check` raises for
one that was swallowed, and every writer calls it before it publishes anything.

A write that publishes more than one name (a fit and ``models/latest.json``; a report
folder) does its renames inside :func:`commit`: a signal arriving there waits until they
are done, and from then on the command finishes (its work is saved; it exits as it would
have) and ``main`` says that the interrupt came too late to stop it.

Outside the CLI (the Python API in a notebook) nothing is installed: a ``KeyboardInterrupt``
is Python's own, and :func:`commit` holds it only for the duration of the renames.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from ddtree_bayes.core.errors import Interrupted

SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: Seconds between two knocks of an interrupt that has not stopped the command yet.
KNOCK_S = 0.5


@dataclass
class Session:
    """What the signals did during one command: each signal received, what the first
    :func:`commit` published (after which signals no longer stop the command), and whether
    the command has ended."""

    received: list[str] = field(default_factory=list)
    saved: str | None = None
    late: list[str] = field(default_factory=list)  # signals received after ``saved``
    holding: int = 0
    #: the command has ended (its exit code is decided): later signals are only recorded
    done: bool = False
    knocker: threading.Thread | None = None

    @property
    def answered(self) -> bool:
        """Nothing more for an interrupt to stop: the command ended or published its work."""
        return self.done or self.saved is not None


_session: Session | None = None


def _handler(signum: int, frame) -> None:
    session = _session
    name = signal.Signals(signum).name
    if session is None:  # a handler left behind: behave as Python would
        raise KeyboardInterrupt
    session.received.append(name)
    if session.done:
        return
    if session.saved is not None:
        session.late.append(name)
        return
    if session.knocker is None:
        session.knocker = threading.Thread(target=_knock, args=(session, signum),
                                           name="ddtree-bayes-interrupt", daemon=True)
        session.knocker.start()
    if session.holding:
        return
    raise Interrupted(name)


def _knock(session: Session, signum: int) -> None:
    """Send ``signum`` to the main thread every :data:`KNOCK_S` until ``session`` is answered
    (a commit in progress is waited for, not knocked on)."""
    main = threading.main_thread().ident
    while True:
        time.sleep(KNOCK_S)
        if session.answered or _session is not session or main is None:
            return
        if not session.holding:
            signal.pthread_kill(main, signum)


def _unraisable(previous):
    """``sys.unraisablehook`` that keeps quiet about an :class:`Interrupted` lost in a
    ``__del__`` or a callback (the knock delivers it again); others go to ``previous``."""
    def hook(unraisable) -> None:
        if isinstance(unraisable.exc_value, Interrupted):
            return
        previous(unraisable)
    return hook


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextmanager
def handled(last: bool = False) -> Iterator[Session]:
    """Inside: SIGINT and SIGTERM raise :class:`Interrupted` and are recorded in the
    :class:`Session` yielded; the previous handlers are restored after, or, when this is the
    ``last`` thing the process does (the console script), both are ignored from then on: the
    exit code is decided, and the interpreter's teardown after a fit takes seconds (numba,
    LLVM) during which Python would otherwise die of the signal. A signal the parent process
    set to be ignored (a background job's SIGINT, ``nohup``) stays ignored. Only the main
    thread can install handlers; elsewhere this yields a session and changes nothing."""
    global _session
    outer = _session
    session = Session()
    previous = {}
    hook = sys.unraisablehook
    if _main_thread():
        for sig in SIGNALS:
            if signal.getsignal(sig) is not signal.SIG_IGN:
                previous[sig] = signal.signal(sig, _handler)
        sys.unraisablehook = _unraisable(hook)
    _session = session
    try:
        yield session
    finally:
        session.done = True
        if session.knocker is not None:
            session.knocker.join(timeout=2 * KNOCK_S)
        for sig, old in previous.items():
            signal.signal(sig, signal.SIG_IGN if last else old)
        if previous:
            sys.unraisablehook = hook
        _session = outer


def check() -> None:
    """Raise :class:`Interrupted` if a signal arrived (and was swallowed by a library)
    before anything was published; a no-op outside :func:`handled` or after a commit."""
    session = _session
    if (session is not None and session.received and not session.answered
            and not session.holding):
        raise Interrupted(session.received[0])


@contextmanager
def commit(what: str) -> Iterator[None]:
    """Publish ``what`` (renames that must all happen or none): a signal already received
    stops it first (:func:`check`); one arriving inside waits until the block is done (and
    a commit inside another is part of it). On
    success, inside :func:`handled`, the command is past the point of no return: later
    signals are recorded in ``Session.late`` and the command finishes. Outside
    :func:`handled` (the API) a signal that arrived inside is raised as
    ``KeyboardInterrupt`` once the renames are done."""
    check()
    session = _session
    if session is not None:
        outermost = session.holding == 0   # (latest.json's rename inside a fit's commit)
        session.holding += 1
        try:
            yield
        finally:
            session.holding -= 1
        if outermost and session.saved is None:  # check() passed: the signals came inside
            session.saved = what
            session.late.extend(session.received)
        return
    held: list[int] = []
    previous = {}
    if _main_thread():
        for sig in SIGNALS:
            if signal.getsignal(sig) is signal.default_int_handler:
                previous[sig] = signal.signal(sig, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
    if held:
        raise KeyboardInterrupt
