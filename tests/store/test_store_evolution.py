"""Schema evolution: a log written with an older schema reads as today's events.

``tests/fixtures/store-v1`` is a JSONL store checked in as it was written (see
``make_store_v1.py``). The tests make a deliberate schema change — ``text.added``
renames ``text`` to ``content`` at version 2 — with an upcaster registered for
(text.added, 1), then read the old log from JSONL and, copied, from SQLite blocks.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from engine import codec
from engine import events as ev
from engine.errors import UnknownSchemaVersion
from engine.session import Session
from engine.store import Store, open_store
from engine.store.verify import reader_of, verify

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "store-v1"
SID = "0190b000-0000-7000-8000-000000000001"
TEXTS = {"Rename the parser module"}


class TextAddedV2(ev.PartEvent, frozen=True, tag="text.added"):
    """The changed type: ``text`` is now ``content``."""

    content: str = ""
    synthetic: bool = False
    ignored: bool = False
    metadata: dict[str, Any] | None = None
    v: int = 2


def set_version(mp: pytest.MonkeyPatch, cls: type[ev.Event], version: int) -> None:
    versions: dict[type[ev.Event], int] = ev.SCHEMA_VERSION
    mp.setitem(versions, cls, version)


def set_class(mp: pytest.MonkeyPatch, tag: str, cls: type[ev.Event]) -> None:
    classes: dict[str, type[ev.Event]] = ev.EVENT_BY_TAG
    mp.setitem(classes, tag, cls)


def rename_text(obj: dict[str, Any]) -> dict[str, Any]:
    obj["content"] = obj.pop("text", "")
    return obj


@pytest.fixture
def old_store(tmp_path: Path) -> str:
    shutil.copytree(FIXTURE, tmp_path / "v1")
    return f"jsonl:///{tmp_path}/v1"


@pytest.fixture
def schema_v2(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    set_class(monkeypatch, "text.added", TextAddedV2)
    set_version(monkeypatch, ev.TextAdded, 2)
    set_version(monkeypatch, TextAddedV2, 2)
    codec.register_upcaster("text.added", 1, rename_text)
    yield
    codec.unregister_upcaster("text.added", 1)


def texts(store: Store) -> list[Any]:
    return [e for e in store.read(SID) if ev.tag_of(type(e)) == "text.added"]


def test_fixture_reads_today(old_store: str) -> None:
    store = open_store(old_store)
    try:
        assert verify(store).ok
        events = list(store.read(SID))
        assert len(events) == 19
        assert all(e.v == 1 for e in events)
        assert {e.text for e in texts(store)} >= TEXTS
    finally:
        store.close()


def test_old_log_is_upcast_on_read(old_store: str, tmp_path: Path, schema_v2: None) -> None:
    store = open_store(old_store)
    try:
        added = texts(store)
        assert added
        assert all(type(e) is TextAddedV2 and e.v == 2 for e in added)
        assert {e.content for e in added} >= TEXTS
        # The bytes are untouched (the chain covers what was written).
        stored = list(reader_of(store).stored(SID))[1].obj
        assert stored is not None
        assert stored["text"] == "Rename the parser module"
    finally:
        store.close()


def test_old_blocks_are_upcast_on_read(old_store: str, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # Copy the v1 events into SQLite blocks while v1 is current, then change the schema.
    source, target = open_store(old_store), open_store(f"sqlite:///{tmp_path}/v1.db")
    target.create_session(SID, created=1)
    target.append(SID, list(source.read(SID)), 0)
    source.close()
    set_class(monkeypatch, "text.added", TextAddedV2)
    set_version(monkeypatch, ev.TextAdded, 2)
    set_version(monkeypatch, TextAddedV2, 2)
    codec.register_upcaster("text.added", 1, rename_text)
    try:
        added = texts(target)
        assert [type(e) for e in added] == [TextAddedV2] * len(added)
        assert {e.content for e in added} >= TEXTS
    finally:
        codec.unregister_upcaster("text.added", 1)
        target.close()


def test_a_missing_upcaster_is_a_typed_error(old_store: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    set_version(monkeypatch, ev.TextAdded, 2)  # changed, but no upcaster
    store = open_store(old_store)
    try:
        with pytest.raises(UnknownSchemaVersion) as info:
            list(store.read(SID))
        assert (info.value.event_type, info.value.version, info.value.current) == (
            "text.added", 1, 2)
        assert "no upcaster" in str(info.value)
    finally:
        store.close()


def test_a_future_version_is_a_typed_error(old_store: str, tmp_path: Path) -> None:
    path = tmp_path / "v1" / "sessions" / f"{SID}.jsonl"
    lines = path.read_bytes().split(b"\n")
    obj = msgspec.json.decode(lines[1])
    obj["event"]["v"] = 7
    lines[1] = msgspec.json.encode(obj)
    path.write_bytes(b"\n".join(lines))
    store = open_store(old_store)
    try:
        with pytest.raises(UnknownSchemaVersion, match="newer than this engine"):
            list(store.read(SID))
    finally:
        store.close()


def test_raw_appends_are_upcast_too(monkeypatch: pytest.MonkeyPatch) -> None:
    set_version(monkeypatch, ev.TranscriptNoted, 2)
    codec.register_upcaster("transcript.noted", 1,
                            lambda obj: {**obj, "text": obj["text"].strip()})
    try:
        store = open_store("memory://")
        s = Session.create(store)
        s.create_conversation()
        s.append([ev.TranscriptNoted(text="  padded  ")])  # written at v1 by an old client
        stored = list(store.read(s.id))[-1]
        assert isinstance(stored, ev.TranscriptNoted)
        assert (stored.text, stored.v) == ("padded", 2)
        with pytest.raises(UnknownSchemaVersion) as info:
            s.append([ev.TranscriptNoted(text="x"), ev.TranscriptNoted(text="y", v=3)])
        assert info.value.batch_index == 2
        assert s.version == 2
        # The public JSON of an old version is upcast on the way in as well.
        old = codec.decode_json(b'{"type": "transcript.noted", "text": " j "}')
        assert isinstance(old, ev.TranscriptNoted)
        assert (old.text, old.v) == ("j", 2)
    finally:
        codec.unregister_upcaster("transcript.noted", 1)
