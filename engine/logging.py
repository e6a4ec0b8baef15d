"""structlog setup: the CLI configures it once at its edge; library code only asks for
loggers. Logs always go to stderr, never into a program's output.

structlog (and the asyncio it imports) loads when something first logs, not at
import: modules take their logger at import, and most runs (a read command,
``convlog --help``) never log, so importing it would only slow every start. A
:func:`configure` made before that is applied then.
"""

from __future__ import annotations

import sys
from typing import Any

_wanted: tuple[str, bool] | None = None  # configure()'s arguments, until structlog loads
_applied = False


def configure(level: str = "warning", *, json: bool = False) -> None:
    global _wanted, _applied
    _wanted, _applied = (level, json), False
    if "structlog" in sys.modules:  # already loaded (an application, a test): now
        _structlog()


def _apply(level: str, json: bool) -> None:
    import logging  # noqa: PLC0415 - only for the level's number, when structlog loads

    import structlog  # noqa: PLC0415 - see the module's docstring

    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if json
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        # resolved per logger, not now: a stderr captured or redirected at
        # configure time may be closed by the time a later thread logs
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )


def _stderr_logger(*args: object) -> Any:
    """structlog's print logger, resolved at each logger's creation to the *current*
    ``sys.stderr`` (so a redirected or captured stderr is honoured)."""
    import structlog  # noqa: PLC0415

    return structlog.PrintLogger(file=sys.stderr)


def default_to_stderr() -> None:
    """Unless the application configured structlog itself: its warnings (a rejected
    event, a moved torn tail) go to stderr instead of structlog's default, stdout."""
    import structlog  # noqa: PLC0415

    if not structlog.is_configured():
        structlog.configure(logger_factory=_stderr_logger)


def _structlog() -> Any:
    """structlog, loaded and set up as :func:`configure` asked (else to stderr)."""
    global _applied  # noqa: PLW0603
    import structlog  # noqa: PLC0415

    if _wanted is not None and not _applied:
        _applied = True
        _apply(*_wanted)
    else:
        default_to_stderr()
    return structlog


class _Deferred:
    """A logger that loads structlog when it first logs (see the module's docstring)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, method: str) -> Any:
        return getattr(_structlog().get_logger(self._name), method)


def get_logger(name: str) -> Any:
    """The engine's logger ``name``, its output on stderr unless the application
    configured structlog itself (see :func:`default_to_stderr`)."""
    return _Deferred(name)
