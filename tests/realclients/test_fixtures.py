"""The transcripts the real CLIs wrote (tests/fixtures/real-cli/<tool>-<version>/),
imported as ``convlog import`` does, held against what the scripted model sent
(the fixture's ``server.jsonl``) and the steps the driver ran (``steps.json``).

Every test asserts the truth. Where convlog's import is still wrong the test fails
with the mismatch named; the fixtures need no CLI (``generate.py`` remade them).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from engine import events as ev
from engine.importers.detect import plan_path
from projections import views as v
from tests.realclients import truth
from tests.realclients.script import SUMMARY

FOLDERS = truth.fixtures()
pytestmark = pytest.mark.parametrize("folder", FOLDERS, ids=[f.name for f in FOLDERS])


@cache
def _load(folder: Path) -> tuple[truth.Truth, truth.Recorded]:
    return truth.load(folder), truth.record(folder)


def _prompts(step: dict[str, object]) -> list[str]:
    """What the person typed in a step: the argument, or each message sent on stdin."""
    if isinstance(step.get("prompt"), str):
        return [str(step["prompt"])]
    out = []
    for line in str(step.get("stdin") or "").splitlines():
        content = json.loads(line)["message"]["content"]
        out += [b["text"] for b in content if b.get("type") == "text"]
    return out


def _typed(t: truth.Truth) -> list[tuple[dict[str, object], str]]:
    """(step, prompt) of every prompt a person typed (slash commands are the CLI's)."""
    return [(s, p) for s in t.steps for p in _prompts(s) if not p.startswith("/")]


def test_fixture_is_complete(folder: Path) -> None:
    t, _ = _load(folder)
    assert t.sent, "the server log holds no request"
    if t.tool != "aider":  # aider has no tool calls: it edits files from the answer text
        assert any(s.calls for s in t.sent)
        assert t.results
    assert (folder / "transcripts").is_dir()


def test_every_prompt_is_a_user_message(folder: Path) -> None:
    t, r = _load(folder)
    missing = [p for _, p in _typed(t) if not r.holding(p)]
    assert missing == [], f"prompts typed but not recorded as user messages: {missing}"


def test_every_answer_text_is_kept(folder: Path) -> None:
    t, r = _load(folder)
    recorded = {x.strip() for x in r.texts("assistant")}
    missing = [(s.n, x) for s in t.answers() if s.step != "compaction"
               for x in s.texts if x.strip() not in recorded]
    assert missing == [], f"texts the model sent, not recorded as assistant text: {missing}"


def test_every_thought_is_kept_apart(folder: Path) -> None:
    """Thinking is a reasoning part of its own, never glued onto the answer."""
    t, r = _load(folder)
    reasoning = {p.text.strip() for _, p in r.parts() if isinstance(p, v.ReasoningPart)}
    missing = [(s.n, x) for s in t.answers() for x in s.thinking if x.strip() not in reasoning]
    assert missing == [], f"thinking sent, not recorded as a reasoning part: {missing}"
    glued = [x for x in r.texts("assistant") if any(
        th and th in x for s in t.sent for th in s.thinking)]
    assert glued == []


def test_every_tool_call_is_kept(folder: Path) -> None:
    t, r = _load(folder)
    tools = r.tools()
    for s in t.answers():
        for call in s.calls:
            part = tools.get(call.id)
            assert part is not None, f"call {call.id} ({call.name}) of request {s.n} lost"
            assert part.tool == call.name
            assert part.state.input == call.input, (call.id, part.state.input)


def test_every_tool_result_is_kept(folder: Path) -> None:
    """The result the CLI sent back to the model is the tool part's output (or error)."""
    t, r = _load(folder)
    tools = r.tools()
    wrong = []
    for call_id, (output, is_error) in t.results.items():
        part = tools.get(call_id)
        state = part.state if part else None
        if is_error:
            ok = isinstance(state, v.ToolStateError) and output.strip() in state.error
        else:
            ok = isinstance(state, v.ToolStateCompleted) and state.output.strip() == \
                output.strip()
        if not ok:
            wrong.append((call_id, type(state).__name__, output[:80]))
    assert wrong == [], f"results the model saw, recorded otherwise: {wrong}"


def test_api_errors_are_marked(folder: Path) -> None:
    """A request the server refused (HTTP 400) is an assistant error in its session."""
    t, r = _load(folder)
    errors = [s for s in t.sent if s.error]
    prompts = {p for _, p in _typed(t) if "[[error]]" in p}
    assert errors
    assert prompts
    message = json.loads(errors[0].error)["error"]["message"]
    written = [f for f in (folder / "transcripts").rglob("*") if f.is_file()
               and message in f.read_text(errors="replace")]
    if not written:
        pytest.skip(f"{folder.name} writes no record of an API error in its transcripts")
    for prompt in prompts:
        holders = r.holding(prompt)
        assert holders, f"the refused prompt {prompt!r} is not recorded"
        marked = [m for sid in holders for m in r.history[sid]
                  if isinstance(m.info, v.AssistantInfo) and m.info.error is not None]
        assert marked, f"no assistant error recorded after {prompt!r} (server sent a 400)"


def test_usage_is_kept(folder: Path) -> None:
    """Each recorded answer's output tokens are the sum of what the model reported for
    the requests whose texts and calls it holds (one, or a turn's several)."""
    t, r = _load(folder)
    by_message: dict[str, tuple[v.AssistantInfo, list[truth.Sent]]] = {}
    texts = {x.strip(): s for s in t.answers() for x in s.texts}
    calls = {c.id: s for s in t.answers() for c in s.calls}
    for messages in r.history.values():
        for m in messages:
            if not isinstance(m.info, v.AssistantInfo):
                continue
            held: dict[int, truth.Sent] = {id(s): s for p in m.parts for s in [
                texts.get(p.text.strip()) if isinstance(p, v.TextPart) else
                calls.get(p.call_id) if isinstance(p, v.ToolPart) else None] if s}
            if held:
                by_message.setdefault(m.info.id, (m.info, list(held.values())))
    assert by_message, "no recorded answer holds what the model sent"
    wrong: list[tuple[object, ...]] = []
    for info, sent in by_message.values():
        if t.tool == "aider" and not all(s.whole for s in sent):
            continue  # streamed, aider counts the tokens itself (no usage is asked for)
        want = sum(s.output_tokens or 0 for s in sent)
        # aider saves the prompt's tokens rounded ("1.0k sent")
        slack = 0.05 * (sent[0].input_tokens or 0) if t.tool == "aider" else 0
        if info.tokens.output != want:
            wrong.append((info.id, [s.n for s in sent], info.tokens.output, want))
        elif len(sent) == 1 and abs(info.tokens.input - (sent[0].input_tokens or 0)) > slack:
            wrong.append((info.id, sent[0].n, "input", info.tokens.input,
                          sent[0].input_tokens))
    assert wrong == [], f"(message, requests, recorded, sent) usage mismatches: {wrong}"


def test_compaction_is_the_sessions_own(folder: Path) -> None:
    """A compaction is a compaction part in the session it compacted, with the summary
    the model wrote, and the session goes on after it."""
    t, r = _load(folder)
    if not any(s.step == "compaction" for s in t.sent):
        pytest.skip(f"{folder.name}: the CLI made no compaction request")
    after = next(p for s, p in _typed(t) if s["label"] == "after-compact")
    first = _typed(t)[0][1]
    holders = [sid for sid in r.holding(after)
               if r.kinds()[sid] == "main" and sid in r.holding(first)]
    assert holders, "the prompts before and after the compaction are in no one main session"
    parts = r.parts(holders[0])
    assert any(isinstance(p, v.CompactionPart) for _, p in parts), "no compaction part"
    assert any(isinstance(p, v.TextPart) and SUMMARY in p.text for _, p in parts), \
        "the summary the model wrote is not in the session"


def test_each_file_alone_imports_as_in_its_folder(folder: Path) -> None:
    """A session file imported alone gives the sessions the folder import gives for it
    (event for event); only a parent in another file can be missing when alone. A fork
    whose file copies its parent's messages (Claude Code's --fork-session, OpenCode's
    --fork) is alone a main session holding that copy: after it come the fork's own
    events, exactly those of the fork the folder makes (same session id)."""
    whole = {s.id: s for s in truth.record(folder).plan.sessions}
    forks = {s.id: s for s in whole.values() if s.kind == "fork"}
    top = [p for p in sorted((folder / "transcripts").rglob("*")) if p.is_file()
           and p.suffix in (".jsonl", ".json", ".md") and "subagents" not in p.parts
           and not p.name.endswith(".meta.json")]
    differ = []
    for path in top:
        for alone in plan_path(path).sessions:
            there = whole.get(alone.id)
            mine = [e for e in alone.events if not isinstance(e, ev.SessionImported)]
            theirs = [e for e in there.events if not isinstance(e, ev.SessionImported)] \
                if there else None
            if there is not None and there.kind == "fork" and alone.kind == "main" and \
                    theirs and len(mine) > len(theirs):
                mine = mine[-len(theirs):]  # the copy of the parent's prefix, then its own
            elif there is None and alone.kind == "main":
                # The fork's id is given where it leaves its parent: its own events name it.
                there = next((f for f in forks.values() if f.events and all(
                    e in alone.events for e in f.events)), None)
                if there is not None:
                    theirs = [e for e in there.events if not isinstance(e, ev.SessionImported)]
                    mine = mine[-len(theirs):]
            if mine != theirs:
                differ.append((path.name, alone.kind, len(mine),
                               None if theirs is None else len(theirs)))
    assert differ == [], f"(file, kind, events alone, events in the folder): {differ}"


def test_session_structure(folder: Path) -> None:
    """Main sessions, forks and children exactly where the script made them: one main
    session holds every turn of the conversation (parallel calls, a failing tool and a
    subagent are no rewinds), a fork only where the CLI forked, a child per subagent.
    Every problem is listed, not only the first."""
    t, r = _load(folder)
    kinds = r.kinds()
    parents = {s.id: s.parent for s in r.plan.sessions}
    by_label: dict[str, list[str]] = {}
    for step, prompt in _typed(t):
        by_label.setdefault(str(step["session"]), []).append(prompt)
    problems: list[str] = []

    def sessions_holding(kind: str, label: str) -> list[str]:
        return [sid for sid, k in kinds.items() if k == kind
                and all(sid in r.holding(p) for p in by_label[label])]

    mains = sessions_holding("main", "main")
    if len(mains) != 1:
        problems.append(f"{len(mains)} main sessions hold every prompt of the conversation")
    main = mains[0] if len(mains) == 1 else None
    forks_made = {str(s["session"]) for s in t.steps if s.get("fork_of")}
    for label in forks_made:
        forks = sessions_holding("fork", label)
        if len(forks) != 1:
            problems.append(f"{len(forks)} forks hold the {label!r} prompts")
        elif main is not None and parents[forks[0]] != main:
            problems.append(f"the {label!r} fork's parent is not the main session")
        if main is not None and any(main in r.holding(p) for p in by_label[label]):
            problems.append(f"the main session holds the {label!r} prompts")
    n_forks = sum(k == "fork" for k in kinds.values())
    if n_forks != len(forks_made):
        problems.append(f"{n_forks} forks where the CLI made {len(forks_made)}")
    subagents = [s for s in t.sent if s.step == "sub"]
    children = [sid for sid, k in kinds.items() if k == "child"]
    if len(children) != len(subagents):
        problems.append(f"{len(children)} child sessions for {len(subagents)} subagents")
    for child in children:
        if parents[child] not in kinds:
            problems.append(f"a child session's parent {parents[child]!r} is no imported "
                            "session")
        elif main is not None and parents[child] != main:
            problems.append(f"a child session's parent is {parents[child]!r}, "
                            "not the main session")
        if not any("[[sub]]" in x for x in r.texts("user", child)):
            problems.append("a child session lacks the task it was given")
    others = {label for label in by_label if label not in forks_made and label != "main"}
    for label in others:  # a conversation of its own (Claude Code's queued prompts)
        holders = sessions_holding("main", label)
        if len(holders) != 1 or holders[0] == main:
            problems.append(f"the {label!r} prompts are in no main session of their own")
    n_mains = sum(k == "main" for k in kinds.values())
    if n_mains != 1 + len(others):
        problems.append(f"{n_mains} main sessions where the CLI made {1 + len(others)}")
    assert problems == [], f"{problems}; sessions: {kinds}"
