"""A proxy in front of a scripted upstream, recording into a SQLite store."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs

from engine.proxy.forward import UPSTREAM_NAMES
from engine.store import Store, open_store
from projections.withparts import WithPartsProjection
from tests.proxy.servers import Reply, SettlingRecorder, Upstream, proxying, running


@attrs.define
class Rig:
    upstream: Upstream
    upstream_url: str
    proxy_url: str
    recorder: SettlingRecorder
    store_url: str

    def store(self) -> Store:
        assert self.recorder.sync()
        return open_store(self.store_url, create=False)

    def views(self) -> dict[str, WithPartsProjection]:
        store = self.store()
        try:
            return {s.id: WithPartsProjection.replay(store, s.id) for s in store.sessions()}
        finally:
            store.close()


@contextmanager
def rig(tmp_path: Path, replies: Sequence[Reply], *, upstream_app: Any = None,
        name: str = "proxy.db") -> Iterator[Rig]:
    """The proxy in front of ``Upstream(replies)`` (or of ``upstream_app``)."""
    upstream = Upstream(replies)
    store_url = f"sqlite:///{tmp_path / name}"
    recorder = SettlingRecorder(store_url)
    recorder.start()
    try:
        with running(upstream_app or upstream) as upstream_url:
            origins = {p: upstream_url for name in UPSTREAM_NAMES
                       for p in UPSTREAM_NAMES[name]}
            with proxying(recorder, origins) as proxy_url:
                yield Rig(upstream, upstream_url, proxy_url, recorder, store_url)
    finally:
        recorder.sync()
        recorder.stop()
