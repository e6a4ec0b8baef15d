"""A session's title in the list: its latest ``session.titled`` event, else its first prompt."""

from __future__ import annotations

from typing import Any

from engine import events as ev
from engine.session import Session
from engine.store.base import Store
from projections.serve.state import sessions_json
from projections.serve.titles import TITLE_CHARS, session_title


def Titled(*, seq: int, title: str) -> ev.SessionTitled:  # noqa: N802 - reads as the event
    return ev.SessionTitled(seq=seq, title=title, source="test")


def events_of(store: Store, sid: str) -> list[Any]:
    return list(store.read(sid))


def test_the_first_prompt_is_the_title(store: Store, session: Session) -> None:
    session.user_message("\n  Fix the parser: it splits on commas\nand more lines")
    m = session.start_message("assistant")
    session.complete_message(m)
    session.user_message("a later prompt")
    assert session_title(events_of(store, session.id), session.id) == \
        "Fix the parser: it splits on commas and more lines"


def test_a_long_prompt_is_cut(store: Store, session: Session) -> None:
    session.user_message("x" * 500)
    title = session_title(events_of(store, session.id), session.id)
    assert title is not None
    assert len(title) == TITLE_CHARS
    assert title.endswith("…")


def test_the_latest_titled_event_wins_over_the_prompt(store: Store, session: Session) -> None:
    session.user_message("the prompt")
    found = events_of(store, session.id)
    last = found[-1].seq
    titled = [*found, Titled(seq=last + 1, title="First title"),
              Titled(seq=last + 2, title="Parser fix for semicolons")]
    assert session_title(titled, session.id) == "Parser fix for semicolons"
    # A blank title does not hide the one before it... nor the prompt.
    assert session_title([*found, Titled(seq=last + 1, title="  ")], session.id) == "the prompt"


def test_no_prompt_no_title(store: Store, session: Session) -> None:
    m = session.start_message("assistant")
    session.complete_message(m)
    assert session_title(events_of(store, session.id), session.id) is None


def test_the_list_carries_title_model_cwd_and_usage(store: Store, session: Session) -> None:
    model = ev.ModelRef(provider_id="anthropic", model_id="claude-sonnet-4")
    session.user_message("Add a --json flag", model=model)
    m = session.start_message("assistant", model=model)
    session.start_step(m)
    session.finish_step(m, "stop", cost=0.25, tokens=ev.Tokens(input=100, output=20))
    session.complete_message(m, finish="stop")
    (row,) = [r for r in sessions_json(store) if r["id"] == session.id]
    assert row["title"] == "Add a --json flag"
    assert row["model"] == "claude-sonnet-4"
    assert row["messages"] == 2
    assert row["tokens"]["input"] == 100
    assert row["tokens"]["output"] == 20
    assert row["cost"] == 0.25


def test_a_tools_wrapping_is_no_title(store: Store, session: Session) -> None:
    session.user_message("<environment_context>\n  <cwd>/home/me/app</cwd>\n</environment_context>")
    session.user_message("<command-name>/review</command-name> the parser module")
    assert session_title(events_of(store, session.id), session.id) == "/review the parser module"


def test_the_list_and_convlog_sessions_agree_on_a_long_session(store: Store,
                                                                 session: Session) -> None:
    """A name given in the middle of a long session (a ``/rename`` after 1,000 events),
    and a first prompt after 500 events of tool chatter: the list read the first and last
    400 events and missed both, while ``convlog sessions`` folds the whole log."""
    from projections.verbs import listing  # noqa: PLC0415

    for _ in range(125):  # 500 events before the first prompt
        m = session.start_message("assistant")
        p = session.add_text(m)
        session.end_part(p)
        session.complete_message(m)
    session.user_message("Port the parser to the new tokenizer")
    for i in range(130):
        session.user_message(f"step {i}")
    mid = session.append([ev.SessionTitled(title="Parser port", source="test")])
    assert store.version(session.id) > 800
    for i in range(220):
        session.user_message(f"later step {i}")

    def both() -> tuple[Any, Any]:
        (row,) = [r for r in sessions_json(store) if r["id"] == session.id]
        (line,) = [r for r in listing(store) if r["id"] == session.id]
        return row["title"], line["title"]
    assert both() == ("Parser port", "Parser port"), mid
    # Listed again after more events: the kept fold goes on from where it stopped.
    session.append([ev.SessionTitled(title="Parser port, take two", source="test")])
    session.user_message("one more")
    assert both() == ("Parser port, take two", "Parser port, take two")


def test_the_first_prompt_after_the_edges_is_the_title(store: Store, session: Session) -> None:
    from projections.verbs import listing  # noqa: PLC0415

    for _ in range(300):
        m = session.start_message("assistant")
        session.complete_message(m)
    session.user_message("<environment_context>cwd</environment_context>")
    for _ in range(300):
        m = session.start_message("assistant")
        session.complete_message(m)
    session.user_message("Find the slow query")
    for _ in range(300):
        m = session.start_message("assistant")
        session.complete_message(m)
    (row,) = [r for r in sessions_json(store) if r["id"] == session.id]
    (line,) = [r for r in listing(store) if r["id"] == session.id]
    assert row["title"] == line["title"] == "Find the slow query"
