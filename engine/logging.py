"""structlog setup: the CLI configures it once at its edge; library code only asks for
loggers. Logs always go to stderr, never into a program's output."""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog


def configure(level: str = "warning", *, json: bool = False) -> None:
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
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


class _StderrLoggerFactory:
    """structlog's print logger, resolved at each logger's creation to the *current*
    ``sys.stderr`` (so a redirected or captured stderr is honoured)."""

    def __call__(self, *args: object) -> structlog.PrintLogger:
        return structlog.PrintLogger(file=sys.stderr)


def default_to_stderr() -> None:
    """Unless the application configured structlog itself: its warnings (a rejected
    event, a moved torn tail) go to stderr instead of structlog's default, stdout."""
    if not structlog.is_configured():
        structlog.configure(logger_factory=_StderrLoggerFactory())


def get_logger(name: str) -> Any:
    """The engine's logger ``name``, its output on stderr unless the application
    configured structlog itself (see :func:`default_to_stderr`)."""
    default_to_stderr()
    return structlog.get_logger(name)
