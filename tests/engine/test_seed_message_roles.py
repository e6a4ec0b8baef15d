"""The seed's message role rules (part-abstraction-toolstate, 3.8 and BR-11..BR-14).

A user message's extension holds the summary (BR-11); an assistant's holds cost (BR-12)
and tokens (BR-13). A field of the other role would be logged and then shown by no
view, so the write side refuses it, and the log stays unchanged.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from engine import events as ev
from engine.errors import PartValidationError
from engine.session import Session
from engine.store import MemoryStore
from projections import views as v
from projections.withparts import WithPartsProjection

TOKENS = ev.Tokens(input=10, output=20, reasoning=3, cache=ev.CacheTokens(read=4, write=5))


def refused(s: Session, act: Callable[[], object]) -> PartValidationError:
    before = list(s.store.read(s.id))
    with pytest.raises(PartValidationError) as err:
        act()
    assert list(s.store.read(s.id)) == before
    return err.value


def test_br_11_a_summary_belongs_to_a_user_message() -> None:
    s = Session.create(MemoryStore())
    proj = WithPartsProjection(s.id)
    s.subscribe(proj)
    summary = ev.UserSummary(title="compacted", body="what happened")
    err = refused(s, lambda: s.start_message("assistant", summary=summary))
    assert err.rule == "BR-11"
    user = s.start_message("user", summary=summary)
    info = proj.message(user).info
    assert isinstance(info, v.UserInfo)
    assert info.summary == summary
    assert info.summary.title == "compacted"


@pytest.mark.parametrize(("cost", "tokens", "rule"), [
    (0.25, None, "BR-12"), (0.0, TOKENS, "BR-13"), (0.25, TOKENS, "BR-12"),
])
def test_br_12_13_cost_and_tokens_belong_to_an_assistant_message(
        cost: float, tokens: ev.Tokens | None, rule: str) -> None:
    s = Session.create(MemoryStore())
    user = s.start_message("user")
    err = refused(s, lambda: s.complete_message(user, cost=cost, tokens=tokens))
    assert err.rule == rule
    s.complete_message(user)  # without them it completes


def test_br_12_13_14_an_assistant_message_carries_the_providers_cost_and_tokens() -> None:
    s = Session.create(MemoryStore())
    proj = WithPartsProjection(s.id)
    s.subscribe(proj)
    mid = s.start_message("assistant")
    info = proj.message(mid).info
    assert isinstance(info, v.AssistantInfo)
    assert info.time.completed is None  # BR-14: only once it completes
    s.complete_message(mid, cost=0.0042, tokens=TOKENS)
    info = proj.message(mid).info
    assert isinstance(info, v.AssistantInfo)
    assert info.cost == 0.0042
    assert info.tokens == TOKENS
    assert proj.to_json()[0]["info"]["tokens"] == {
        "input": 10, "output": 20, "reasoning": 3, "cache": {"read": 4, "write": 5}}
    assert info.time.completed is not None
    assert info.time.completed >= info.time.created
