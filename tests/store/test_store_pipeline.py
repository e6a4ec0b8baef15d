"""The append pipeline is written once (``ComposedStore._record``): a recorder implements
only its write hooks, so no backend can drift from the shared id, version and retry
rules; ``Store`` is only the interface a user of a store calls."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest

from engine import events as ev
from engine.errors import StoreError
from engine.store.base import Prepared, Store
from engine.store.composed import ComposedStore
from engine.store.jsonl import JSONLStore
from engine.store.memory import MemoryStore
from engine.store.postgres import PostgresStore
from engine.store.sqlite import SQLiteStore
from engine.store.verify import reader_of

RECORDERS: tuple[type[Store], ...] = (MemoryStore, JSONLStore, SQLiteStore, PostgresStore)
# Every backend is composed of a recorder (issue 31): the store is the shared
# ComposedStore and the recorder is a plain object, no Store at all.
COMPOSED: dict[type[Store], Callable[[Path], ComposedStore]] = {
    MemoryStore: lambda _: MemoryStore(),
    JSONLStore: lambda path: JSONLStore(str(path / "store")),
    SQLiteStore: lambda path: SQLiteStore(str(path / "store.db")),
}
# A store's own private methods besides its constructor: PostgreSQL's one-round-trip
# append (the coarse hook, below) is the only one.
OWN_HOOKS: dict[type[Store], tuple[str, ...]] = {PostgresStore: ("_record",)}
# The verify hooks (ten of them sat on every recorder) are the reader's, in either spelling.
VERIFY_HOOKS = ("_own_units", "_link_holds", "_span_links", "_verify_ids", "_own_positions",
                "_recorded_head", "_recorded_genesis", "_write_state_problem", "_own_stored",
                "units", "link_holds", "span_links", "verify_ids", "own_positions",
                "recorded_head", "recorded_genesis", "write_state_problem")
RECORDER_HOOKS = ("lock", "head", "stored_ids", "insert", "select", "select_all", "find")
PIPELINE = ("append", "_taken", "_decide", "_classify", "_match", "_prepare",
            "_check_expected", "stored_seqs")
HOOKS = ("_write_head", "_stored_ids", "_insert")


def _defined(cls: type, name: str) -> bool:
    """Whether ``name`` is defined by the class or a base below ``ComposedStore`` (the
    pipeline's one home)."""
    return any(name in vars(k) for k in cls.__mro__
               if k not in (Store, ComposedStore) and issubclass(k, Store))


def test_store_is_only_the_interface_a_user_calls() -> None:
    """``Store`` holds no pipeline, hook or default: every method of it is an abstract
    public verb (and the context manager), so nothing a backend could override
    hides there."""
    methods = {n: v for n, v in vars(Store).items() if callable(v)}
    assert [n for n in methods if n.startswith("_") and n not in ("__enter__", "__exit__")
            and not (n.startswith("__") and n.endswith("__"))] == []
    assert Store.__abstractmethods__ == {n for n in methods if not n.startswith("_")}
    assert len(Store.__abstractmethods__) <= 20
    # The verify hooks are the reader's alone: verify walks store.reader.
    assert [n for n in VERIFY_HOOKS if n in vars(ComposedStore)] == []


def test_no_recorder_keeps_a_copy_of_the_pipeline() -> None:
    for cls in RECORDERS:
        assert [n for n in PIPELINE if _defined(cls, n)] == [], cls.__name__


def _composed_of_a_plain_recorder(cls: type[Store], store: ComposedStore) -> None:
    assert isinstance(store, cls)
    assert isinstance(store, ComposedStore)
    assert not isinstance(store.recorder, Store), cls.__name__
    assert [n for n in (*PIPELINE, *HOOKS) if hasattr(store.recorder, n)] == []
    assert [n for n in VERIFY_HOOKS if hasattr(store.recorder, n)] == [], cls.__name__
    assert id(store.reader) != id(store.recorder)
    assert not isinstance(store.reader, Store)
    assert [n for n in RECORDER_HOOKS if not callable(getattr(store.recorder, n, None))] == []
    # Nothing of the store is the backend's own but its constructor and its public
    # verbs (JSONL's repair, flush, close): no hook, no step of the pipeline.
    assert [n for n in vars(cls) if callable(vars(cls)[n]) and n.startswith("_")
            and n != "__init__"] == list(OWN_HOOKS.get(cls, ())), cls.__name__
    # The hot hooks are the recorder's own methods, bound on the store (no frame between).
    assert getattr(store._insert, "__self__", None) is store.recorder, cls.__name__


def test_a_composed_backend_is_the_shared_store_over_a_plain_recorder(tmp_path: Path) -> None:
    for cls, make in COMPOSED.items():
        store = make(tmp_path)
        _composed_of_a_plain_recorder(cls, store)
        store.close()


def test_postgres_is_the_shared_store_over_a_plain_recorder(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    try:
        _composed_of_a_plain_recorder(PostgresStore, store)
    finally:
        store.close()


def test_every_composed_store_writes_through_its_recorders_hooks() -> None:
    for cls in RECORDERS:
        assert issubclass(cls, ComposedStore), cls.__name__
        assert [n for n in HOOKS if _defined(cls, n) and n not in vars(ComposedStore)] == []
        assert not getattr(cls, "__abstractmethods__", None), cls.__name__


def test_only_postgres_takes_the_coarse_hook_for_its_one_round_trip() -> None:
    assert [c.__name__ for c in RECORDERS if _defined(c, "_record")] == ["PostgresStore"]


def test_a_subclass_override_of_a_bound_hook_is_kept() -> None:
    """ComposedStore binds the hot hooks to the recorder's methods on the instance; a
    subclass that overrides one (tests wrap stores so) must still be called."""
    calls: list[str] = []

    class Noting(MemoryStore):
        def _insert(self, session_id: str, batch: Prepared) -> int:
            calls.append(session_id)
            return super()._insert(session_id, batch)

        def find_event(self, event_id: str) -> tuple[str, int] | None:
            calls.append(event_id)
            return super().find_event(event_id)

    store = Noting()
    sid = "0194d1e0-0000-7000-8000-0000000c0001"
    store.create_session(sid, created=0)
    store.append(sid, [ev.TextDelta(id="0194d1e0-0000-7000-8000-0000000c0002",
                                    message_id="m", part_id="p", delta="x")])
    assert store.find_event("0194d1e0-0000-7000-8000-0000000c0002") == (sid, 1)
    assert calls == [sid, "0194d1e0-0000-7000-8000-0000000c0002"]


def test_verify_walks_the_readers_of_composed_stores_only() -> None:
    """Verification is the reader's walk (``store.reader``): a ``Store`` that is not
    composed of a recorder and a reader is refused with a typed error, not walked
    through hooks it does not have."""
    class Elsewhere:  # a Store by registration only (no recorder, no reader)
        url = "elsewhere://"

    Store.register(Elsewhere)
    store = MemoryStore()
    assert reader_of(store) is store.reader
    with pytest.raises(StoreError, match="elsewhere://"):
        reader_of(cast(Store, Elsewhere()))
