"""Finding a chromium the usual ways; without one, a reason that says how to get one.

These run without a browser: the finder reads the environment and PATH only.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.support import browser as b


def executable(path: Path) -> Path:
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.mark.parametrize("name", b.BROWSER_NAMES)
def test_each_usual_name_on_path_is_found(tmp_path: Path, name: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    found = executable(tmp_path / name)
    monkeypatch.delenv(b.BROWSER_ENV, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert b.find_chromium() == str(found)


def test_the_environment_variable_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    executable(tmp_path / "chromium")
    mine = executable(tmp_path / "my-chrome")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv(b.BROWSER_ENV, str(mine))
    assert b.find_chromium() == str(mine)


def test_a_wrong_environment_variable_is_reported_not_replaced(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    executable(tmp_path / "chromium")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv(b.BROWSER_ENV, str(tmp_path / "nothing-here"))
    assert b.find_chromium() is None
    assert "is not an executable" in b.missing_browser_reason()


def test_no_browser_names_the_install_command(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(b.BROWSER_ENV, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # empty: no chromium anywhere
    assert b.find_chromium() is None
    reason = b.missing_browser_reason()
    assert "apt-get install chromium" in reason
    assert "playwright install chromium" in reason


def test_playwrights_own_download_is_tried_before_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    executable(tmp_path / "chromium")
    own = executable(tmp_path / "playwright-chrome")

    class Chromium:
        executable_path = str(own)

    class Pw:
        chromium = Chromium()

    monkeypatch.delenv(b.BROWSER_ENV, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert b.find_chromium(Pw()) == str(own)  # type: ignore[arg-type]


def test_without_a_browser_the_browser_tests_skip_outside_ci_and_fail_in_ci(
        tmp_path: Path, pytester_env: dict[str, str]) -> None:
    """The browser fixture itself, run in a child pytest with no chromium to find."""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    test = Path(__file__).parent / "test_browser.py"
    for ci, expect in (("", "SKIPPED"), ("true", "ERROR")):
        env = dict(pytester_env, PATH=str(tmp_path), CI=ci)
        env.pop(b.BROWSER_ENV, None)
        out = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
             f"{test}::test_diff_two_points", "-rs"],
            env=env, capture_output=True, text=True, timeout=120, check=False)
        assert expect in out.stdout, out.stdout + out.stderr
        if not ci:
            assert "apt-get install chromium" in out.stdout
        else:
            assert "CI=true but no chromium found" in out.stdout


@pytest.fixture
def pytester_env() -> dict[str, str]:
    """This process's environment, where a child pytest finds the project."""
    return {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
