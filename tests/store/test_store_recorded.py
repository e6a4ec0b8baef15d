"""A store composed over a narrow recorder (``engine.store.recorded``): the dict
recorder that docs/stores.md shows as a fifth backend passes the store contract
(every test of ``test_store_contract`` that takes a ``store``), and verification
catches an edited, removed or reordered row through what the recorder selects."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.store import Store
from engine.store.recorded import RecordedStore
from engine.store.verify import verify
from tests.store import test_store_contract as contract

DOCS = Path(__file__).resolve().parents[2] / "docs" / "stores.md"


def _docs_namespace() -> dict[str, Any]:
    """The names the docs' recorder example defines, run as the docs test runs it."""
    text = DOCS.read_text()
    part = text[text.index("## Writing a fifth backend"):text.index("## The door")]
    code = re.search(r"```python\n(.*?)```", part, re.S)
    assert code is not None
    namespace: dict[str, Any] = {}
    exec(compile(code.group(1), str(DOCS), "exec"), namespace)
    return namespace


_DOCS = _docs_namespace()


@pytest.fixture
def store() -> Iterator[Store]:
    s = RecordedStore(_DOCS["DictRecorder"](), url="dict://")
    yield s
    s.close()


_CONTRACT = [name for name, fn in vars(contract).items()
             if name.startswith("test_") and callable(fn)
             and set(fn.__code__.co_varnames[:fn.__code__.co_argcount]) <= {"store", "session"}]


@pytest.mark.parametrize("name", _CONTRACT)
def test_the_dict_recorder_keeps_the_store_contract(name: str, store: Store,
                                                    request: pytest.FixtureRequest) -> None:
    fn = getattr(contract, name)
    args = {"store": store}
    if "session" in fn.__code__.co_varnames[:fn.__code__.co_argcount]:
        args["session"] = request.getfixturevalue("session")
    fn(**{k: v for k, v in args.items() if k in fn.__code__.co_varnames})


def test_the_contract_is_really_run() -> None:
    assert len(_CONTRACT) >= 20


def test_verify_reads_what_the_recorder_selects(store: Store) -> None:
    recorder = store.recorder.rows  # type: ignore[attr-defined]
    sid = "0194d1e0-0000-7000-8000-0000000e0001"
    store.create_session(sid, created=0)
    from engine import events as ev  # noqa: PLC0415
    events = [ev.TextDelta(id=f"0194d1e0-0000-7000-8000-0000000e{n:04x}", message_id="m",
                           part_id="p", delta=str(n)) for n in range(1, 6)]
    store.append(sid, events)
    assert verify(store, deep=False).ok
    rows = recorder.by_session[sid]
    rows[2], rows[3] = rows[3], rows[2]  # reordered
    assert not verify(store, deep=False).ok
    rows[2], rows[3] = rows[3], rows[2]
    del rows[1]  # removed
    assert not verify(store, deep=False).ok
