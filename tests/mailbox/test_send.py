"""The seed's send_message, get_pending_messages and respond_chat, as events."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from engine import events as ev
from engine.mailbox import ERRORS, MailboxError
from engine.session import StepClock
from engine.store import Store
from projections.mailbox import MAILBOX_SESSION, Mailbox

FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466"


def mail_events(store: Store) -> list[ev.MailSent]:
    return [e for e in store.read(MAILBOX_SESSION) if isinstance(e, ev.MailSent)]


def test_a_sends_b_receives_one_event(mailbox: Mailbox, store: Store) -> None:
    """The seed's integration test: A (task session) sends, B (chat session) receives."""
    ta, tb = mailbox.authenticate("agent-a"), mailbox.authenticate("agent-b")
    sent = mailbox.send(ta, "agent-b", "タスクXについて質問があります", related_task_id="task-x")
    assert [e.message_id for e in mail_events(store)] == [sent.id]  # one event, not two
    pending = mailbox.pending(tb)
    assert [(m.id, m.sender_id, m.content, m.related_task_id) for m in pending] == [
        (sent.id, "agent-a", "タスクXについて質問があります", "task-x")]
    assert mailbox.pending(tb) == []  # delivered now
    assert mailbox.receipts(sent.id) == {"agent-b": "delivered"}
    assert [m.id for m in mailbox.view.outbox("project-1", "agent-a")] == [sent.id]
    assert [m.id for m in mailbox.view.inbox("project-1", "agent-b")] == [sent.id]
    assert mailbox.view.inbox("project-1", "agent-a") == []


def test_reply_reads_the_answered_message_in_the_same_batch(mailbox: Mailbox,
                                                           store: Store) -> None:
    ta, tb = mailbox.authenticate("agent-a"), mailbox.authenticate("agent-b")
    question = mailbox.send(ta, "agent-b", "question")
    version = store.version(MAILBOX_SESSION)
    answer = mailbox.reply(tb, question.id, "answer")
    assert answer.reply_to == question.id
    assert answer.receivers == ("agent-a",)
    added = list(store.read(MAILBOX_SESSION, version + 1))
    assert [type(e) for e in added] == [ev.MailSent, ev.MailRead]
    assert mailbox.receipts(question.id) == {"agent-b": "read"}
    assert [m.id for m in mailbox.pending(ta)] == [answer.id]
    with pytest.raises(MailboxError) as err:
        mailbox.reply(ta, question.id, "I cannot answer my own question")
    assert err.value.code == "message_not_found"


def test_mark_read_and_unread(mailbox: Mailbox) -> None:
    ta, tb = mailbox.authenticate("agent-a"), mailbox.authenticate("agent-b")
    first, second = mailbox.send(ta, "agent-b", "1"), mailbox.send(ta, "agent-b", "2")
    assert [m.id for m in mailbox.unread("agent-b")] == [first.id, second.id]
    assert mailbox.mark_read(tb, [second.id]) == 1
    assert mailbox.mark_read(tb, [second.id]) == 0  # already read: nothing written
    assert [m.id for m in mailbox.unread("agent-b")] == [first.id]
    assert [m.id for m in mailbox.pending(tb)] == [first.id]  # read ones are not pending
    with pytest.raises(MailboxError) as err:
        mailbox.mark_read(ta, [first.id])  # not a receiver
    assert err.value.code == "message_not_found"


def test_broadcast_is_one_event_with_a_state_per_receiver(mailbox: Mailbox,
                                                          store: Store) -> None:
    mailbox.register_agent("agent-d")  # exists, but in no project: not a receiver
    ta, tc = mailbox.authenticate("agent-a"), mailbox.authenticate("agent-c")
    msg = mailbox.broadcast(ta, "standup in 5")
    assert msg.receivers == ("agent-b", "agent-c")
    assert msg.broadcast
    assert len(mail_events(store)) == 1
    mailbox.pending(tc)
    assert mailbox.receipts(msg.id) == {"agent-b": "sent", "agent-c": "delivered"}
    chosen = mailbox.broadcast(ta, "just you two", ["agent-c", "agent-b"])
    assert chosen.receivers == ("agent-c", "agent-b")


def test_a_retried_send_is_idempotent(mailbox: Mailbox, store: Store) -> None:
    ta = mailbox.authenticate("agent-a")
    first = mailbox.send(ta, "agent-b", "once", client_message_id="c-1")
    again = mailbox.send(ta, "agent-b", "once", client_message_id="c-1")
    assert first == again
    assert len(mail_events(store)) == 1
    with pytest.raises(MailboxError) as err:
        mailbox.send(ta, "agent-b", "something else", client_message_id="c-1")
    assert (err.value.code, err.value.status) == ("client_message_id_reused", 409)


# --------------------------------------------------------------------------- errors


def _refused(mailbox: Mailbox, store: Store, call: Callable[[], object]) -> MailboxError:
    before = list(store.read(MAILBOX_SESSION))
    with pytest.raises(MailboxError) as err:
        call()
    assert list(store.read(MAILBOX_SESSION)) == before  # nothing written on any error
    return err.value


@pytest.fixture
def other_project(store: Store, clock: StepClock, mailbox: Mailbox) -> Mailbox:
    other = Mailbox(mailbox.log, "project-2")
    other.create_project("/work/project-2")
    other.register_agent("agent-x")
    other.assign("agent-x")
    return other


@pytest.mark.parametrize(("call", "code"), [
    (("agent-b", "x" * 4001), "content_too_long"),
    (("agent-a", "hi"), "cannot_message_self"),
    (("agent-zzz", "hi"), "agent_not_found"),
    (("agent-x", "hi"), "target_agent_not_in_project"),
])
def test_each_error_of_the_seed(mailbox: Mailbox, other_project: Mailbox, store: Store,
                                call: tuple[str, str], code: str) -> None:
    ta = mailbox.authenticate("agent-a")
    target, content = call
    err = _refused(mailbox, store, lambda: mailbox.send(ta, target, content))
    assert (err.code, err.status) == (code, ERRORS[code][0])


def test_the_statuses_are_the_seeds() -> None:
    assert {c: ERRORS[c][0] for c in ("content_too_long", "cannot_message_self",
                                      "agent_not_found", "target_agent_not_in_project",
                                      "working_directory_not_set",
                                      "invalid_session_token")} == {
        "content_too_long": 400, "cannot_message_self": 400, "agent_not_found": 404,
        "target_agent_not_in_project": 403, "working_directory_not_set": 500,
        "invalid_session_token": 401}


def test_the_checks_run_in_the_seeds_order(mailbox: Mailbox, other_project: Mailbox,
                                           store: Store) -> None:
    """Each call breaks every rule from one point on: the earliest one is reported."""
    ta = mailbox.authenticate("agent-a")
    long = "x" * 4001
    assert _refused(mailbox, store, lambda: mailbox.send("bad", "agent-a", long)).code == \
        "invalid_session_token"
    assert _refused(mailbox, store, lambda: mailbox.send(ta, "agent-a", long)).code == \
        "content_too_long"
    assert _refused(mailbox, store, lambda: mailbox.send(ta, "agent-a", "x")).code == \
        "cannot_message_self"
    mailbox.set_working_directory("")
    assert _refused(mailbox, store, lambda: mailbox.send(ta, "agent-zzz", "x")).code == \
        "agent_not_found"
    assert _refused(mailbox, store, lambda: mailbox.send(ta, "agent-x", "x")).code == \
        "target_agent_not_in_project"
    err = _refused(mailbox, store, lambda: mailbox.send(ta, "agent-b", "x"))
    assert (err.code, err.status) == ("working_directory_not_set", 500)


def test_the_limit_counts_grapheme_clusters(mailbox: Mailbox) -> None:
    ta = mailbox.authenticate("agent-a")
    assert mailbox.send(ta, "agent-b", FAMILY * 4000).content == FAMILY * 4000
    with pytest.raises(MailboxError, match="content_too_long"):
        mailbox.send(ta, "agent-b", FAMILY * 4000 + "!")


def test_a_broadcast_is_refused_whole(mailbox: Mailbox, other_project: Mailbox,
                                      store: Store) -> None:
    ta = mailbox.authenticate("agent-a")
    err = _refused(mailbox, store,
                   lambda: mailbox.broadcast(ta, "hi", ["agent-b", "agent-x"]))
    assert err.code == "target_agent_not_in_project"


# --------------------------------------------------------------------------- tokens


def test_tokens_expire_are_revoked_and_are_bound_to_their_project(
        mailbox: Mailbox, other_project: Mailbox, store: Store, clock: StepClock) -> None:
    ta = mailbox.authenticate("agent-a", ttl_ms=1000)
    assert mailbox.agent_of(ta) == "agent-a"
    clock.advance(1000)
    assert _refused(mailbox, store, lambda: mailbox.send(ta, "agent-b", "x")).status == 401
    tb = mailbox.authenticate("agent-b")
    mailbox.revoke(tb)
    assert _refused(mailbox, store, lambda: mailbox.pending(tb)).code == \
        "invalid_session_token"
    tx = other_project.authenticate("agent-x")
    assert _refused(mailbox, store, lambda: mailbox.send(tx, "agent-b", "x")).status == 401
    tc = mailbox.authenticate("agent-c")
    mailbox.unassign("agent-c")
    assert _refused(mailbox, store, lambda: mailbox.send(tc, "agent-b", "x")).status == 401
    assert _refused(mailbox, store, lambda: other_project.authenticate("agent-a")).code == \
        "sender_not_in_project"


def test_only_the_token_hash_is_logged(mailbox: Mailbox, store: Store) -> None:
    token = mailbox.authenticate("agent-a")
    raw = b"".join(str(e).encode() for e in store.read(MAILBOX_SESSION))
    assert token.encode() not in raw
    issued = [e for e in store.read(MAILBOX_SESSION) if isinstance(e, ev.TokenIssued)]
    assert len(issued) == 1
    assert len(issued[0].token_hash) == 64


def test_a_passkey_is_checked(mailbox: Mailbox, store: Store) -> None:
    mailbox.register_agent("agent-p", passkey="s3cret")
    mailbox.assign("agent-p")
    assert _refused(mailbox, store, lambda: mailbox.authenticate("agent-p")).status == 401
    assert _refused(mailbox, store,
                    lambda: mailbox.authenticate("agent-p", "wrong")).code == \
        "invalid_credentials"
    assert mailbox.agent_of(mailbox.authenticate("agent-p", "s3cret")) == "agent-p"


def test_a_reopened_mailbox_sees_the_same_state(mailbox: Mailbox, store: Store,
                                                clock: StepClock) -> None:
    ta, tb = mailbox.authenticate("agent-a"), mailbox.authenticate("agent-b")
    sent = mailbox.send(ta, "agent-b", "persisted")
    mailbox.pending(tb)
    again = Mailbox(store, "project-1", clock=clock)
    assert again.receipts(sent.id) == {"agent-b": "delivered"}
    assert again.agent_of(tb) == "agent-b"
    assert [m.id for m in again.messages("agent-b")] == [sent.id]


def test_listing_pages_by_cursor_and_time(mailbox: Mailbox) -> None:
    ta, tb = mailbox.authenticate("agent-a"), mailbox.authenticate("agent-b")
    sent = [mailbox.send(ta, "agent-b", str(i)) for i in range(5)]
    answer = mailbox.reply(tb, sent[0].id, "re")
    listing = mailbox.messages("agent-b")
    assert [m.id for m in listing] == [*(m.id for m in sent), answer.id]
    page = mailbox.messages("agent-b", after=sent[1].cursor, limit=2)
    assert [m.id for m in page] == [sent[2].id, sent[3].id]
    assert [m.id for m in mailbox.messages("agent-b", since=sent[3].created_at)] == [
        sent[4].id, answer.id]
    assert [m.content for m in mailbox.messages("agent-c")] == []


@pytest.mark.parametrize("limit", [-1, 0, 1001, True, 2.0, "3"])
def test_a_bad_limit_is_refused_in_python(mailbox: Mailbox, limit: object) -> None:
    """Issue 29, defect 3: limit=-1 sliced off the last message. Every door refuses."""
    ta = mailbox.authenticate("agent-a")
    mailbox.send(ta, "agent-b", "one")
    with pytest.raises(MailboxError, match="invalid_request"):
        mailbox.messages("agent-a", limit=limit)  # type: ignore[arg-type]
