"""Many senders at once, threads and processes, SQLite and PostgreSQL: nothing lost,
nothing written twice, and a retried send (same client message id) is a no-op."""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from engine import events as ev
from engine.session import system_clock
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


RACERS = 4
RACED = 25


def race_retries(url: str, index: int, start: float, out: str) -> None:
    """A retry racing its original: every racer sends the SAME client message ids
    (as one agent whose reply got lost and who resent from another process), all
    starting at one moment. Writes the message ids it got back, one per line."""
    store = open_store(url)
    try:
        mb = Mailbox(store, "project-1")
        token = mb.authenticate("sender-0")
        time.sleep(max(0.0, start - time.time()))
        ids = [mb.send(token, "hub", f"retry {n}", client_message_id=f"retry-{n}").id
               for n in range(RACED)]
        Path(out).write_text("\n".join(ids))
    finally:
        store.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_racing_retries_of_one_client_message_id(kind: str, tmp_path: Path,
                                                 request: pytest.FixtureRequest) -> None:
    """Both calls of a retry that races its original return the same message id:
    the loser's event differs from the winner's only in its timestamp, and the
    store's event-id conflict must lead to the original, not to an error."""
    url = _url(kind, tmp_path, request)
    _set_up(url)
    ctx = multiprocessing.get_context("spawn")
    start = time.time() + 3.0  # spawned interpreters need a moment to start
    outs = [tmp_path / f"ids-{i}.txt" for i in range(RACERS)]
    procs = [ctx.Process(target=race_retries, args=(url, i, start, str(outs[i])))
             for i in range(RACERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * RACERS
    answers = [o.read_text().split("\n") for o in outs]
    assert all(a == answers[0] for a in answers)
    assert len(set(answers[0])) == RACED
    store = open_store(url)
    try:
        sent = [e for e in store.read(MAILBOX_SESSION) if isinstance(e, ev.MailSent)]
        assert sorted(e.message_id for e in sent) == sorted(answers[0])
    finally:
        store.close()


def test_a_retry_that_lands_between_decide_and_append(tmp_path: Path) -> None:
    """Deterministic form of the race: the original's event is committed by another
    writer after this writer decided (it saw no such message) and before its append
    reaches the store.
    The store then finds the id with another timestamp (EventIdConflict); the send
    must answer with the original message, not fail."""
    url = f"sqlite:///{tmp_path}/race.db"
    _set_up(url)
    first, second = open_store(url), open_store(url)
    try:
        original = Mailbox(first, "project-1")
        token = original.authenticate("sender-0")
        calls = [0]
        got: list[str] = []

        def clock() -> int:
            # The retry's mailbox reads the clock when it opens, when it judges the
            # token (deciding), then when it stamps the event, after the session found
            # the id new. The original commits at that third read: only the store's
            # own id check, under its lock, sees it.
            calls[0] += 1
            if calls[0] == 3:
                got.append(original.send(token, "hub", "hello", client_message_id="c-1").id)
            return system_clock()

        retry = Mailbox(second, "project-1", clock=clock)
        again = retry.send(token, "hub", "hello", client_message_id="c-1")
        assert [again.id] == got
        sent = [e for e in second.read(MAILBOX_SESSION) if isinstance(e, ev.MailSent)]
        assert [e.message_id for e in sent] == got
    finally:
        first.close()
        second.close()
