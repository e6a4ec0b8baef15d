"""The package metadata a new user's first install reads."""

from __future__ import annotations

import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _project() -> dict[str, object]:
    with PYPROJECT.open("rb") as f:
        data = tomllib.load(f)
    project = data["project"]
    assert isinstance(project, dict)
    return project


def test_license_is_an_spdx_expression() -> None:
    # A `{text = ...}` table makes setuptools print a deprecation warning
    # three times during the quick start's first install.
    assert isinstance(_project()["license"], str)


def test_build_backend_understands_spdx_license_strings() -> None:
    with PYPROJECT.open("rb") as f:
        requires = tomllib.load(f)["build-system"]["requires"]
    setuptools = [r for r in requires if r.startswith("setuptools")]
    assert setuptools == ["setuptools>=77"]  # PEP 639 strings need 77+


def test_core_keeps_its_four_runtime_dependencies() -> None:
    deps = _project()["dependencies"]
    assert isinstance(deps, list)
    names = sorted(d.split(">")[0].split("=")[0].strip() for d in deps)
    assert names == ["attrs", "cattrs", "msgspec", "structlog"]
