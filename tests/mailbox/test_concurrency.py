"""Many senders at once, threads and processes, SQLite and PostgreSQL: nothing lost,
nothing written twice, and a retried send (same client message id) is a no-op."""

from __future__ import annotations

import multiprocessing
import threading
from collections import Counter
from pathlib import Path

import pytest

from engine import events as ev
from engine.store import open_store
from projections.mailbox import MAILBOX_SESSION, Mailbox

SENDERS = 4
EACH = 15


def _set_up(url: str) -> None:
    store = open_store(url)
    try:
        mb = Mailbox(store, "project-1")
        mb.create_project("/work/project-1")
        for agent in ["hub", *(f"sender-{i}" for i in range(SENDERS))]:
            mb.register_agent(agent)
            mb.assign(agent)
    finally:
        store.close()


def send_many(url: str, index: int) -> None:
    """One sender (a thread or a process) with its own store connection: every
    message is sent twice, as a client retrying after a lost reply would."""
    store = open_store(url)
    try:
        mb = Mailbox(store, "project-1")
        token = mb.authenticate(f"sender-{index}")
        for n in range(EACH):
            first = mb.send(token, "hub", f"{index}:{n}", client_message_id=f"{index}-{n}")
            again = mb.send(token, "hub", f"{index}:{n}", client_message_id=f"{index}-{n}")
            assert first.id == again.id
    finally:
        store.close()


def _check(url: str) -> None:
    store = open_store(url)
    try:
        sent = [e for e in store.read(MAILBOX_SESSION) if isinstance(e, ev.MailSent)]
        contents = Counter(e.content for e in sent)
        assert len(sent) == SENDERS * EACH
        assert set(contents) == {f"{i}:{n}" for i in range(SENDERS) for n in range(EACH)}
        assert max(contents.values()) == 1
        seqs = [e.seq for e in store.read(MAILBOX_SESSION)]
        assert seqs == list(range(1, len(seqs) + 1))
        hub = Mailbox(store, "project-1")
        got = hub.pending(hub.authenticate("hub"))
        assert len(got) == SENDERS * EACH
        assert hub.pending(hub.authenticate("hub")) == []
    finally:
        store.close()


def _url(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tmp_path}/mail.db"
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_concurrent_threads(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    url = _url(kind, tmp_path, request)
    _set_up(url)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            send_many(url, i)
        except BaseException as exc:  # reported below, with the thread's own error
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(SENDERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    _check(url)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_concurrent_processes(kind: str, tmp_path: Path,
                              request: pytest.FixtureRequest) -> None:
    url = _url(kind, tmp_path, request)
    _set_up(url)
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=send_many, args=(url, i)) for i in range(SENDERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * SENDERS
    _check(url)


def test_one_mailbox_shared_by_threads() -> None:
    """One Mailbox object (one writer) used by many threads at once."""
    store = open_store("memory://")
    mb = Mailbox(store, "project-1")
    mb.create_project("/w")
    for agent in ["hub", *(f"sender-{i}" for i in range(SENDERS))]:
        mb.register_agent(agent)
        mb.assign(agent)
    tokens = [mb.authenticate(f"sender-{i}") for i in range(SENDERS)]

    def run(i: int) -> None:
        for n in range(EACH):
            mb.send(tokens[i], "hub", f"{i}:{n}", client_message_id=f"{i}-{n}")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(SENDERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(mb.view.inbox("project-1", "hub")) == SENDERS * EACH
