"""OpenCode: a message's info and each part are read once as the Struct of their role or
kind (``engine/importers/opencode_shapes.py``). An object or list of another shape
where that kind reads one is refused naming the message, the part and the JSON path;
before, it was read as empty (a ``time`` of "x" as no time, ``attachments`` of "ab" as
none) or failed with a bare ``TypeError``. What a kind does not read is not checked,
and a part kind the importer does not map is reported, whatever its ``type`` holds."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from benchmarks import import_same_bytes
from engine.importers.base import ImportInputError
from engine.importers.opencode import plan_opencode
from tests.importers.support import FIXTURES

EXPORT = json.loads((FIXTURES / "opencode" / "export-live.json").read_text())
Change = Callable[[dict[str, Any]], None]


def _plan(tmp_path: Path, change: Change) -> Any:
    data = copy.deepcopy(EXPORT)
    change(data)
    path = tmp_path / "export.json"
    path.write_text(json.dumps(data))
    return plan_opencode(path)


def _part(m: int, p: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda d: d["messages"][m]["parts"][p]


@pytest.mark.parametrize(("change", "named"), [
    (lambda d: _part(0, 0)(d).__setitem__("time", "x"),
     "message 'msg_a00001': a field of the wrong shape (part 'prt_u1a': Expected "
     "`object | null`, got `str` - at `$.time`)"),
    (lambda d: _part(1, 3)(d).__setitem__("state", []), "part 'prt_a1d'"),
    (lambda d: _part(1, 3)(d)["state"].__setitem__("time", 5), "at `$.state.time`"),
    (lambda d: _part(1, 3)(d)["state"].__setitem__("attachments", "ab"),
     "at `$.state.attachments`"),
    (lambda d: _part(1, 7)(d).__setitem__("files", "ab"), "part 'prt_a1h'"),
    (lambda d: _part(1, 8)(d).__setitem__("tokens", {"cache": 3}), "at `$.tokens.cache`"),
    (lambda d: d["messages"][1]["info"].__setitem__("tokens", [1]),
     "message 'msg_a00002': a field of the wrong shape (Expected `object | null`, got "
     "`array` - at `$.tokens`)"),
    (lambda d: d["messages"][0]["info"].__setitem__("time", True), "at `$.time`"),
])
def test_a_field_of_the_wrong_shape_names_its_path(tmp_path: Path, change: Change,
                                                   named: str) -> None:
    with pytest.raises(ImportInputError) as refused:
        _plan(tmp_path, change)
    assert named in str(refused.value)


def test_what_a_kind_does_not_read_is_not_checked(tmp_path: Path) -> None:
    """A text part's ``state``, a user message's ``tokens``, a file part's ``time``: not
    read, so not refused; the same events are written (the info's unmapped field rides
    in its metadata, as any does)."""
    def change(d: dict[str, Any]) -> None:
        _part(0, 0)(d)["state"] = "x"
        d["messages"][0]["info"]["tokens"] = "x"
        _part(0, 1)(d)["time"] = "x"
    plain = _plan(tmp_path, lambda d: None)
    assert [[type(e) for e in s.events] for s in _plan(tmp_path, change).sessions] == [
        [type(e) for e in s.events] for s in plain.sessions]


@pytest.mark.parametrize("kind", [["text"], {"a": 1}, 7, None, "future-kind"])
def test_a_part_kind_not_mapped_is_reported_whatever_its_type(tmp_path: Path,
                                                              kind: Any) -> None:
    """A list or an object as ``type`` failed with ``unhashable type``; like any kind the
    importer does not map, it is now reported and the rest imports."""
    plan = _plan(tmp_path, lambda d: _part(0, 0)(d).__setitem__("type", kind))
    assert f"part type {kind!r}: not imported" in plan.report.unmapped
    assert plan.sessions[0].events


def test_the_same_bytes_dump_covers_opencode() -> None:
    inputs: list[tuple[Path, import_same_bytes.Planner]] = [
        (p, import_same_bytes._opencode) for p in import_same_bytes.opencode_inputs()[:2]]
    dumped = import_same_bytes.dump_all(inputs)
    assert all("sessions" in e["strict"] and e["strict"]["sessions"] for e in dumped.values())
