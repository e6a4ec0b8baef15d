"""Writes withparts_golden.jsonl.gz: random sessions' events and their WithParts JSON.

It was run in the tree before views reused the events' value types, so the file
records what the old converter wrote. Usage (from the repository root):
``python -m tests.projections.data.make_withparts_golden 200 60 OUT.jsonl.gz``.
"""

from __future__ import annotations

import gzip
import json
import sys

from hypothesis import HealthCheck, given, settings

from engine import codec
from engine import events as ev
from engine.session import Session, StepClock
from engine.store import MemoryStore
from projections.withparts import WithPartsProjection
from tests.projections.test_roundtrip_property import random_session
from tests.support.render_sessions import sessions

OUT: list[dict[str, object]] = []


def _settings(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


def record(session: Session) -> None:
    events = list(session.store.read(session.id))
    cases = []
    for k in sorted({len(events), len(events) // 2}):
        proj = WithPartsProjection(session.id).apply_all(events[:k])
        cases.append([k, json.dumps(proj.to_json(), ensure_ascii=False)])
    OUT.append({"events": [json.loads(codec.encode_json(e)) for e in events], "json": cases})


def rich() -> None:
    """One session that carries every value type (attachments and sources included)."""
    s = Session.create(MemoryStore(), clock=StepClock(step=5))
    model = ev.ModelRef(provider_id="anthropic", model_id="claude")
    text = ev.SourceText(value="x", start=1, end=2)
    u = s.start_message("user", model=model, system="sys", tools={"bash": True}, variant="v",
                        summary=ev.UserSummary(title="t", body="b", diffs=[{"file": "a"}]))
    s.add_text(u, "hi", streaming=False)
    s.add_file(u, "text/plain", "file:///a", filename="a",
               source=ev.FileSource(path="a", text=text))
    s.add_file(u, "text/plain", "file:///b", source=ev.SymbolSource(
        path="b", name="f", kind=12, range={"start": {"line": 1}}, text=text))
    s.add_file(u, "text/plain", "mcp://c", source=ev.ResourceSource(client_name="srv", uri="u"))
    s.complete_message(u)
    a = s.start_message("assistant", parent_id=u, model=model, agent="build",
                        path=ev.PathInfo(cwd="/w", root="/"))
    s.start_step(a)
    s.add_agent(a, "explore", source=text)
    s.add_subtask(a, "p", "d", "general", model=model, command="c")
    s.add_retry(a, 2, ev.MessageError(kind="api", message="429", status_code=429, retryable=True))
    t = s.add_tool(a, call_id="c1", tool="read")
    s.tool_input_ready(t, {"path": "a"})
    s.start_tool(t, title="a")
    s.complete_tool(t, "out", title="read a", metadata={"m": 1}, attachments=[
        ev.Attachment(part_id="prt_att1", mime="image/png", url="data:", filename="i.png",
                      source=ev.SymbolSource(path="p", name="n", kind=1, text=text)),
        ev.Attachment(part_id="prt_att2", mime="text/plain", url="file:///x")])
    s.finish_step(a, "tool-calls", cost=0.5, tokens=ev.Tokens(
        input=1, output=2, reasoning=3, cache=ev.CacheTokens(read=4, write=5)))
    s.complete_message(a, cost=0.5, tokens=ev.Tokens(input=1), finish="stop",
                       error=ev.MessageError(kind="output_length", status_code=None))
    record(s)


def main(raw_examples: int, api_examples: int, out: str) -> None:
    @_settings(raw_examples)
    @given(session=random_session())
    def raw(session: Session) -> None:
        record(session)

    @_settings(api_examples)
    @given(pair=sessions())
    def api(pair: tuple[Session, object]) -> None:
        record(pair[0])

    rich()
    raw()
    api()
    with gzip.open(out, "wt", encoding="utf-8") as f:
        for case in OUT:
            f.write(json.dumps(case, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
