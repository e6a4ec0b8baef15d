"""Claude Code and Codex as installed (tests/realclients/install.sh), run through the
script now, into a temporary folder: every step behaves as scripted, and the fresh
transcripts pass every fixture check that the checked-in ones pass (the known
mismatches of ``known.py`` excepted). A CLI release that breaks the script, or
that writes what convlog reads differently from the fixture, fails here.

Missing CLIs skip outside CI and fail in CI (``CI=true``), as PostgreSQL's tests do.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.realclients import test_fixtures as checks
from tests.realclients.clients import find
from tests.realclients.generate import generate
from tests.realclients.known import KNOWN
from tests.support.pgserver import IN_CI

LIVE = ("claude", "codex")  # the required two, ~20 s together; the others take minutes
CHECKS: list[Callable[[Path], None]] = [
    getattr(checks, name) for name in dir(checks) if name.startswith("test_")]


@pytest.fixture(scope="module", params=LIVE)
def live(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    tool = str(request.param)
    binary, why = find(tool)
    if binary is None:
        if IN_CI:
            pytest.fail(f"CI=true but {why}")
        pytest.skip(why)
    folder = generate(tool, out=tmp_path_factory.mktemp(f"live-{tool}"))
    assert folder is not None
    return folder


def test_steps_ran_as_scripted(live: Path) -> None:
    steps = json.loads((live / "steps.json").read_text())
    failed = [(s["label"], s["exit"]) for s in steps
              if (s["exit"] != 0) != (s["label"] == "error")]
    assert failed == [], f"steps whose exit status is not the script's: {failed}"
    served = {json.loads(line).get("step") for line in
              (live / "server.jsonl").read_text().splitlines()}
    expected = {"parallel", "parallel-answer", "fail", "fail-answer", "task", "sub",
                "sub-answer", "task-answer", "compaction", "error"}
    assert expected <= served, f"scripted steps the CLI never asked for: {expected - served}"


def test_fresh_transcripts_pass_the_fixture_checks(live: Path) -> None:
    failures = []
    for check in CHECKS:
        if f"{check.__name__}[{live.name}]" in KNOWN:
            continue  # a known import mismatch (the fixture's test marks it)
        try:
            check(live)
        except pytest.skip.Exception:
            pass
        except AssertionError as exc:
            failures.append(f"{check.__name__}: {str(exc)[:300]}")
    assert failures == [], "\n".join(failures)
