"""An import proves each event at the door once: the whole plan is proved before any of
it is written (a refused event leaves no session behind), and the store keeps those
bytes instead of proving every event a second time (it did, a third of an import's
CPU on tool-heavy files)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from engine import events as ev
from engine.importers import write
from engine.importers.base import ImportInputError
from engine.importers.detect import plan_path
from engine.store import MemoryStore, door, open_store
from engine.store import composed as store_pipeline
from engine.store.verify import verify
from tests.importers.support import FIXTURES

REAL = (Path(__file__).resolve().parent.parent / "fixtures" / "real-cli" /
        "claude-code-2.1.197" / "transcripts")


def test_each_event_is_proved_once(monkeypatch: pytest.MonkeyPatch) -> None:
    plan = plan_path(FIXTURES / "codex")
    proved: list[str] = []

    def one(event: ev.Event) -> bytes:
        proved.append(event.id)
        return door.admit(event)

    def many(events: Iterable[ev.Event], **kw: Any) -> list[bytes]:
        batch = list(events)
        proved.extend(e.id for e in batch)
        return door.admit_all(batch, **kw)

    store = MemoryStore()
    monkeypatch.setattr(write, "admit", one)
    monkeypatch.setattr(write, "admit_all", many)  # the importer proves a session at once
    monkeypatch.setattr(store_pipeline, "admit", one)  # the store's append pipeline
    monkeypatch.setattr(store_pipeline, "admit_all", many)
    write.write_plan(store, plan)
    assert sorted(proved) == sorted(e.id for s in plan.sessions for e in s.events)
    assert verify(store).ok
    stored = [e for s in plan.sessions for e in store.read(s.id, (s.fork_seq or 0) + 1)]
    assert len(stored) == len(proved)


def test_a_refused_event_writes_no_session() -> None:
    plan = plan_path(REAL)
    assert len(plan.sessions) > 2
    last = plan.sessions[-1]
    bad = next(i for i, e in enumerate(last.events) if isinstance(e, ev.TextAdded))
    # A value the door refuses (a set is no JSON), in the plan's last session.
    last.events[bad] = msgspec.structs.replace(last.events[bad], metadata={"x": {1, 2}})
    store = MemoryStore()
    with pytest.raises(ImportInputError):
        write.write_plan(store, plan)
    assert store.sessions() == []


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_the_kept_bytes_are_what_each_store_would_have_made(tmp_path: Path, kind: str) -> None:
    """The bytes the import hands over are the ones the store's own proof makes: the
    stores verify, and read back the planned events."""
    plan = plan_path(REAL)
    url = f"sqlite:///{tmp_path / 's.db'}" if kind == "sqlite" else \
        f"jsonl:///{tmp_path}/s.jsonl"
    store = open_store(url)
    try:
        write.write_plan(store, plan)
        assert verify(store).ok
        for s in plan.sessions:
            own = list(store.read(s.id, (s.fork_seq or 0) + 1))
            assert [e.id for e in own] == [e.id for e in s.events]
            assert [door.admit(e) for e in own] == [
                door.admit(msgspec.structs.replace(e, session_id=s.id, seq=o.seq, time=o.time,
                                                   actor=o.actor))
                for e, o in zip(s.events, own, strict=True)]
    finally:
        store.close()


@pytest.mark.parametrize("door_first", [True, False])
def test_the_first_refusal_in_the_log_s_order_is_the_one_named(door_first: bool) -> None:
    # A session is judged as one batch, then proved at the door; a refusal anywhere
    # names the first event the tables or the door refuse, in order, as the
    # event-by-event check always did.
    plan = plan_path(FIXTURES / "codex")
    events = plan.sessions[0].events
    texts = [i for i, e in enumerate(events) if isinstance(e, ev.TextAdded)]
    first, second = texts[0], texts[-1]
    door_at, table_at = (first, second) if door_first else (second, first)
    events[door_at] = msgspec.structs.replace(events[door_at], metadata={"x": {1, 2}})
    events[table_at] = ev.PartEnded(id=events[table_at].id, time=events[table_at].time,
                                    message_id="no-such-message", part_id="no-such-part")
    with pytest.raises(ImportInputError) as info:
        write.write_plan(MemoryStore(), plan)
    said = str(info.value)
    assert ("$.metadata.x" in said) is door_first, said
