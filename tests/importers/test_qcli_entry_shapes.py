"""Q CLI: a history entry's generation, a message's variant and the containers around
them are declared (``engine/importers/qcli_shapes.py``), so a save of the wrong shape
there is refused naming the JSON path; before, hand-written checks named a field by
prose (``history[2]: a history entry is ...``), a bare ``KeyError`` (a message without
``content``) or no place at all (``content must be an object with one variant key``).
What the importer accepted before, it still accepts with the same events."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from engine.importers.qcli import QCliFormatError, events_from_qcli
from tests.importers.support import FIXTURES

OBJECTS = json.loads((FIXTURES / "qcli-v1.14-objects.json").read_text())
PAIRS = json.loads((FIXTURES / "qcli-v1.10-pairs.json").read_text())
Change = Callable[[dict[str, Any]], None]


def _changed(base: dict[str, Any], change: Change) -> dict[str, Any]:
    data = copy.deepcopy(base)
    change(data)
    return data


def _refusal(base: dict[str, Any], change: Change) -> str:
    with pytest.raises(QCliFormatError) as refused:
        events_from_qcli(_changed(base, change))
    return str(refused.value)


def _user(i: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda d: d["history"][i]["user"]


@pytest.mark.parametrize(("change", "path"), [
    # an entry of neither generation
    (lambda d: d["history"].__setitem__(1, 7), "got `int` - at `$.history[1]`"),
    (lambda d: d["history"].__setitem__(1, [d["history"][1]["user"]]),
     "`array` of length 2, got 1 - at `$.history[1]`"),
    (lambda d: d["history"][1].pop("assistant"),
     "missing required field `assistant` - at `$.history[1]`"),
    (lambda d: d["history"][1].__setitem__("user", None), "at `$.history[1].user`"),
    (lambda d: d["tangent_state"]["main_history"].__setitem__(0, "x"),
     "at `$.tangent_state.main_history[0]`"),
    (lambda d: d["checkpoint_manager"]["checkpoints"][0]["history_snapshot"].__setitem__(0, None),
     "at `$.checkpoint_manager.checkpoints[0].history_snapshot[0]`"),
    # a message's content or an assistant message that is not one known variant
    (lambda d: _user(0)(d).__setitem__("content", {}), "exactly one variant key - at "
     "`$.history[0].user.content`"),
    (lambda d: _user(0)(d).__setitem__("content", {"Prompt": {}, "ToolUseResults": {}}),
     "exactly one variant key - at `$.history[0].user.content`"),
    (lambda d: _user(2)(d).__setitem__("content", {"Nope": {}}),
     "unknown field `Nope` - at `$.history[2].user.content`"),
    (lambda d: _user(1)(d).__setitem__("content", {"ToolUseResults": None}),
     "got `null` - at `$.history[1].user.content.ToolUseResults`"),
    (lambda d: _user(0)(d).pop("content"), "missing required field `content` - at "
     "`$.history[0].user`"),
    (lambda d: d.__setitem__("next_message", {"images": None}),
     "missing required field `content` - at `$.next_message`"),
    (lambda d: d["history"][0].__setitem__("assistant", {"Foo": {}}),
     "unknown field `Foo` - at `$.history[0].assistant`"),
    (lambda d: d["history"][0].__setitem__("assistant", {}),
     "exactly one variant key - at `$.history[0].assistant`"),
    (lambda d: d["history"][0]["assistant"].__setitem__("Response", None),
     "got `null` - at `$.history[0].assistant.Response`"),
    # the containers
    (lambda d: d.__setitem__("history", {}), "at `$.history`"),
    (lambda d: d.__setitem__("next_message", []), "at `$.next_message`"),
    (lambda d: d.__setitem__("tangent_state", False), "at `$.tangent_state`"),
    (lambda d: d["tangent_state"].__setitem__("main_history", 1),
     "at `$.tangent_state.main_history`"),
    (lambda d: d.__setitem__("checkpoint_manager", []), "at `$.checkpoint_manager`"),
    (lambda d: d["checkpoint_manager"].__setitem__("checkpoints", 5),
     "checkpoints is a list of checkpoints - at `$.checkpoint_manager`"),
    (lambda d: d["checkpoint_manager"]["checkpoints"].__setitem__(0, None),
     "at `$.checkpoint_manager.checkpoints[0]`"),
])
def test_a_save_of_the_wrong_shape_names_the_path(change: Change, path: str) -> None:
    assert path in _refusal(OBJECTS, change)


def test_a_pair_of_the_wrong_shape_names_the_path() -> None:
    assert "`array` of length 2, got 3 - at `$.history[0]`" in _refusal(
        PAIRS, lambda d: d["history"][0].append(None))
    assert "got `int` - at `$.history[1][0]`" in _refusal(
        PAIRS, lambda d: d["history"][1].__setitem__(0, 1))
    assert "exactly one variant key - at `$.history[1][1]`" in _refusal(
        PAIRS, lambda d: d["history"][1].__setitem__(1, {}))


@pytest.mark.parametrize("value", [None, 0, "", False, {}, 0.0])
def test_a_false_checkpoints_value_reads_as_none_as_before(value: Any) -> None:
    """The importer read ``checkpoints`` with ``or []``: those saves import, as saves
    without checkpoints."""
    data = _changed(OBJECTS, lambda d: d["checkpoint_manager"].__setitem__("checkpoints",
                                                                         value))
    none = _changed(OBJECTS, lambda d: d["checkpoint_manager"].__setitem__("checkpoints", []))
    assert events_from_qcli(data).events == events_from_qcli(none).events


def test_a_snapshot_is_only_checked_for_its_generation() -> None:
    """A checkpoint's snapshot is compared with the history, never walked: a variant the
    walk would refuse there imports (the checkpoint is then not placed), as before."""
    def change(d: dict[str, Any]) -> None:
        entry = d["checkpoint_manager"]["checkpoints"][0]["history_snapshot"][0]
        entry["user"]["content"] = {"Nope": {}}
        entry["assistant"] = None
    result = events_from_qcli(_changed(OBJECTS, change))
    assert any("not a prefix" in n for n in result.unmapped)


def test_a_snapshot_in_pairs_is_placed_in_a_history_of_objects() -> None:
    """Entries of both generations compare as saved in the newest shape."""
    checkpoint = OBJECTS["checkpoint_manager"]["checkpoints"][0]
    assert checkpoint["history_snapshot"]  # the fixture places it after some entries

    def pairs(d: dict[str, Any]) -> None:
        snapshot = d["checkpoint_manager"]["checkpoints"][0]["history_snapshot"]
        snapshot[:] = [[e["user"], e["assistant"]] if e["request_metadata"] is None else e
                       for e in snapshot]
    before = events_from_qcli(copy.deepcopy(OBJECTS))
    after = events_from_qcli(_changed(OBJECTS, pairs))
    assert after.events == before.events
    assert not any("not a prefix" in n for n in after.unmapped)


def test_a_missing_and_a_null_additional_context_still_differ() -> None:
    """A turn nobody prompted (empty prompt, nothing of its own) imports as no message;
    a null additional context is something of its own, as it was when the saved
    message was compared."""
    def bare(extra: dict[str, Any]) -> Change:
        def change(d: dict[str, Any]) -> None:
            user = d["history"][0]["user"]
            user.pop("additional_context")
            user.update({"content": {"Prompt": {"prompt": ""}}, "timestamp": None,
                         **extra})
        return change
    missing = events_from_qcli(_changed(OBJECTS, bare({})))
    null = events_from_qcli(_changed(OBJECTS, bare({"additional_context": None})))
    assert len(null.events) > len(missing.events)
    assert any("empty prompt" in n for n in null.unmapped)
    assert not any("entry 0: an empty prompt" in n for n in missing.unmapped)
