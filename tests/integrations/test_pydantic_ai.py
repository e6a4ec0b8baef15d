"""pydantic-ai: messages both ways, a recorded run continued from the log."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from engine.integrations.pydantic_ai import record_messages
from engine.session import Session
from engine.store import MemoryStore
from projections import views as v
from projections.integrations.pydantic_ai import to_model_messages
from projections.render import anthropic as render
from projections.withparts import WithPartsProjection
from tests.support.ingest_checks import fresh


def dump(messages: list[ModelMessage]) -> list[Any]:
    return ModelMessagesTypeAdapter.dump_python(messages, mode="json")  # type: ignore[no-any-return]


def weather_agent() -> Agent[None, str]:
    agent = Agent(TestModel(), instructions="Be brief.")

    @agent.tool_plain
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    return agent


def test_a_run_round_trips_exactly_and_reads_as_a_conversation() -> None:
    result = weather_agent().run_sync("Weather in Paris?")
    session, view = fresh()
    record_messages(session, result.all_messages())

    assert dump(to_model_messages(view.messages())) == dump(result.all_messages())
    [tool] = [p for m in view.messages() for p in m.parts if isinstance(p, v.ToolPart)]
    assert isinstance(tool.state, v.ToolStateCompleted)
    assert tool.tool == "weather"
    assert tool.state.output.startswith("sunny in")
    assert render.messages(view.messages())[0]["content"][0]["text"] == "Weather in Paris?"
    assert all(m.info.time.created for m in view.messages())


def test_message_history_from_the_session_continues_the_run() -> None:
    agent = weather_agent()
    session, view = fresh()
    first = agent.run_sync("Weather in Paris?")
    record_messages(session, first.new_messages())
    second = agent.run_sync("And Rome?", message_history=to_model_messages(view.messages()))
    record_messages(session, second.new_messages())
    assert dump(to_model_messages(view.messages())) == dump(second.all_messages())
    users = [p.text for m in view.messages() if isinstance(m.info, v.UserInfo)
             for p in m.parts if isinstance(p, v.TextPart) and not p.synthetic]
    assert users == ["Weather in Paris?", "And Rome?"]


def test_a_tool_retry_is_a_failed_tool_and_comes_back_as_a_retry_prompt() -> None:
    calls = 0

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nonlocal calls
        calls += 1
        if calls < 3:
            return ModelResponse(parts=[ThinkingPart("hmm"), ToolCallPart(
                "lookup", {"key": "k"}, tool_call_id=f"call_{calls}")])
        return ModelResponse(parts=[TextPart("found it")])

    agent = Agent(FunctionModel(model))

    @agent.tool_plain
    def lookup(key: str) -> str:
        """Look a key up."""
        if calls < 2:
            raise ModelRetry("try again")
        return "value"

    result = agent.run_sync("look k up")
    session, view = fresh()
    record_messages(session, result.all_messages())
    tools = [p for m in view.messages() for p in m.parts if isinstance(p, v.ToolPart)]
    assert [type(t.state) for t in tools] == [v.ToolStateError, v.ToolStateCompleted]
    assert dump(to_model_messages(view.messages())) == dump(result.all_messages())


def test_a_native_convlog_history_converts_and_reports_what_it_cannot_carry() -> None:
    session, view = fresh()
    user = session.user_message("Read hello.py")
    reply = session.start_message("assistant", parent_id=user)
    session.add_text(reply, "Reading it.", streaming=False)
    read = session.add_tool(reply, "call_1", "read", input={"path": "hello.py"})
    session.start_tool(read)
    session.complete_tool(read, "print('hello')")
    run = session.add_tool(reply, "call_2", "bash", input={"cmd": "pytest"})
    session.start_tool(run)  # still running: the agent crashed here
    session.add_file(reply, "image/png", "data:image/png;base64,AAAA")
    report: list[str] = []
    messages = to_model_messages(view.messages(), report=report)
    assert [type(m) for m in messages] == [ModelRequest, ModelResponse, ModelRequest]
    assert isinstance(messages[0].parts[0], UserPromptPart)
    assert [p.part_kind for p in messages[1].parts] == ["text", "tool-call", "tool-call"]
    returns = messages[2].parts
    assert [getattr(p, "content", None) for p in returns] == [
        "print('hello')", "[Tool execution was interrupted]"]
    assert any("file part not sent" in r for r in report)
    assert any("call_2: running" in r for r in report)


TEXT = st.text(alphabet=st.sampled_from(list("ab é日🙂\n")), max_size=12)


# A failed tool's kind, and the kind pydantic-ai gives back (its outcomes are fewer).
KIND_BACK = {"error": "error", "denied": "denied", "aborted": "aborted",
             "cancelled": "aborted", "timeout": "aborted", "truncated": "aborted"}
EXPRESSIBLE_KINDS = ["error", "denied", "aborted"]
OTHER = ["file", "step", "agent", "ignored"]  # parts pydantic-ai cannot carry


@st.composite
def histories(draw: st.DrawFn, *, lossy: bool = False) -> tuple[Session, int]:
    """A convlog session; without ``lossy``, of what both sides express: user and system
    prompts, text, thinking, tools completed or failed with an expressible kind. With
    ``lossy``, also what pydantic-ai cannot carry; returns how many such things there are.
    """
    session = Session.create(MemoryStore())
    n_call = lost = 0
    kinds = list(KIND_BACK) if lossy else EXPRESSIBLE_KINDS
    for _ in range(draw(st.integers(1, 4))):
        user = session.start_message("user")
        for synthetic in draw(st.lists(st.booleans(), min_size=1, max_size=3)):
            session.add_text(user, draw(TEXT), streaming=False, synthetic=synthetic)
        session.complete_message(user)
        mid = session.start_message("assistant")
        refs = []
        kinds_drawn = ["text", "thinking", "tool", *(OTHER if lossy else [])]
        for kind in draw(st.lists(st.sampled_from(kinds_drawn), max_size=5)):
            if kind == "text":
                session.add_text(mid, draw(TEXT), streaming=False)
            elif kind == "thinking":
                session.add_reasoning(mid, draw(TEXT), streaming=False)
            elif kind == "tool":
                n_call += 1
                ref = session.add_tool(mid, f"call_{n_call}", draw(st.sampled_from(
                    ["read", "bash"])), input={"arg": draw(TEXT)})
                session.start_tool(ref)
                refs.append(ref)
            else:
                lost += 1
                if kind == "file":
                    session.add_file(mid, "image/png", "data:image/png;base64,AAAA")
                elif kind == "step":  # a step-start part and a step-finish part
                    session.start_step(mid)
                    session.finish_step(mid, "stop")
                    lost += 1
                elif kind == "agent":
                    session.add_agent(mid, "expert")
                else:
                    session.add_text(mid, "hidden", streaming=False, ignored=True)
        for ref in refs:
            if draw(st.booleans()):
                session.complete_tool(ref, draw(TEXT) or "(none)")
            else:
                kind = draw(st.sampled_from(kinds))
                lost += kind not in EXPRESSIBLE_KINDS
                session.fail_tool(ref, draw(TEXT).strip() or "failed", kind=kind)  # type: ignore[arg-type]
        session.complete_message(mid)
    return session, lost


def essence(history: list[v.WithParts]) -> list[Any]:
    """What both sides can express, message by message."""
    out: list[Any] = []
    for m in history:
        parts: list[Any] = []
        for p in m.parts:
            if isinstance(p, v.TextPart) and p.ignored:
                continue  # an empty response's envelope
            if isinstance(p, v.TextPart):
                parts.append((p.TAG, p.text, p.synthetic))
            elif isinstance(p, v.ReasoningPart):
                parts.append((p.TAG, p.text))
            elif isinstance(p, v.ToolPart):
                s = p.state
                result = s.output if isinstance(s, v.ToolStateCompleted) else \
                    (s.error, KIND_BACK[(s.metadata or {}).get("kind", "error")]) \
                    if isinstance(s, v.ToolStateError) else None
                parts.append((p.call_id, p.tool, dict(s.input), s.TAG, result))
        out.append((m.info.role, parts))
    return out


def view_of(session: Session) -> WithPartsProjection:
    return WithPartsProjection(session.id).apply_all(session.store.read(session.id))


@settings(max_examples=60, deadline=None)
@given(histories())
def test_a_history_survives_convlog_to_pydantic_ai_to_convlog(
        drawn: tuple[Session, int]) -> None:
    session, _ = drawn
    view_a = view_of(session)
    report: list[str] = []
    messages = to_model_messages(view_a.messages(), report=report)
    assert report == []  # nothing lost: every part kind here is expressible
    copy, view_b = fresh()
    record_messages(copy, messages)
    assert essence(view_b.messages()) == essence(view_a.messages())
    # and the way back again is exact, now that the parts were recorded from pydantic-ai
    assert dump(to_model_messages(view_b.messages())) == dump(messages)


@settings(max_examples=60, deadline=None)
@given(histories(lossy=True))
def test_what_pydantic_ai_cannot_carry_is_reported_and_the_rest_survives(
        drawn: tuple[Session, int]) -> None:
    session, lost = drawn
    report: list[str] = []
    messages = to_model_messages(view_of(session).messages(), report=report)
    assert len(report) == lost  # one line for each part or failure kind not carried
    copy, view_b = fresh()
    record_messages(copy, messages)
    # the rest survives (a failure kind without an outcome comes back as aborted)
    assert essence(view_b.messages()) == essence(view_of(session).messages())
