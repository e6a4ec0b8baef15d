"""The CLI configures structlog once; a logger used later (a proxy's restart thread,
an embedding application's next test) must write to the ``sys.stderr`` of that
moment, not to the stream that was current at ``configure`` time, which may have
been closed since (a captured stderr, a redirected one)."""

from __future__ import annotations

import io
import sys

import pytest
import structlog

from engine import logging as convlog_logging


def test_a_configured_logger_follows_the_current_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    old = structlog.get_config()
    try:
        first = io.StringIO()
        monkeypatch.setattr(sys, "stderr", first)
        convlog_logging.configure("warning")
        first.close()  # the stream current at configure time is gone
        second = io.StringIO()
        monkeypatch.setattr(sys, "stderr", second)
        convlog_logging.get_logger("convlog.test").error("later.line", n=1)
        assert "later.line" in second.getvalue()
    finally:
        structlog.configure(**old)
