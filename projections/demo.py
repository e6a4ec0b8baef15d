"""The demo session: a realistic streamed agent turn, recorded event by event."""

from __future__ import annotations

from collections.abc import Callable

from engine import events as ev
from engine.session import Session, StepClock
from engine.store.base import Store

DEMO_START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: the demo is reproducible
DEMO_PROMPT = "The tests in parser.py fail since yesterday. Can you fix them?"


def stepping_clock(start: int = DEMO_START_MS, step: int = 7) -> Callable[[], int]:
    """A deterministic clock whose first reading is ``start``, then ``step`` ms apart."""
    return StepClock(start - step, step)


def _chunks(text: str, size: int = 6) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def record_demo(store: Store, *, clock: Callable[[], int] | None = None) -> Session:
    """Record the demo session and return its writer.

    A user asks for a bug fix; the assistant streams reasoning and text, reads a
    file (completes), runs a command that needs approval and fails, then streams
    the final answer in a second step.
    """
    s = Session.create(store, clock=clock or stepping_clock())
    model = ev.ModelRef(provider_id="anthropic", model_id="claude-sonnet-4-5")
    user = s.user_message(DEMO_PROMPT, agent="build", model=model)
    m = s.start_message("assistant", agent="build", model=model, parent_id=user,
                        path=ev.PathInfo(cwd="/work/app", root="/work/app"))
    s.start_step(m, snapshot="a1b2c3")
    thought = s.add_reasoning(m)
    for piece in _chunks("The user says parser tests fail. Read parser.py first, "
                         "then run the test suite to see the failure."):
        s.reasoning_delta(thought, piece)
    s.end_part(thought, metadata={"signature": "sig-demo"})
    text = s.add_text(m)
    for piece in _chunks("Let me look at parser.py and run the tests."):
        s.text_delta(text, piece)
    s.end_part(text)

    read = s.add_tool(m, "toolu_01", "read_file")
    for fragment in ['{"pa', 'th": "pa', 'rser.py"}']:
        s.tool_input_delta(read, fragment)
    s.tool_input_ready(read, {"path": "parser.py"})
    s.start_tool(read, title="parser.py")
    s.complete_tool(read, "def parse(s):\n    return s.split(',')\n", title="parser.py",
                    metadata={"lines": 2})

    bash = s.add_tool(m, "toolu_02", "bash", raw='{"command": "pytest -x"}')
    s.tool_input_ready(bash, {"command": "pytest -x"})
    s.request_approval(bash, reason="runs a shell command")
    s.approve(bash)
    s.start_tool(bash, title="pytest -x", timeout_ms=120_000)
    s.tool_progress(bash, metadata={"output": "collected 12 items\n"})
    s.fail_tool(bash, "exit status 1: 1 failed, 11 passed")
    s.finish_step(m, "tool-calls", cost=0.0042,
                  tokens=ev.Tokens(input=1830, output=164, cache=ev.CacheTokens(read=1200)))

    s.start_step(m)
    answer = s.add_text(m)
    for piece in _chunks("parse() splits on commas but the new fixtures use semicolons. "
                         "Split on both: re.split(r'[;,]', s). The failing test passes now."):
        s.text_delta(answer, piece)
    s.end_part(answer)
    s.finish_step(m, "stop", cost=0.0031, tokens=ev.Tokens(input=2110, output=58))
    s.complete_message(m, cost=0.0073, finish="stop",
                       tokens=ev.Tokens(input=3940, output=222, cache=ev.CacheTokens(read=1200)))
    return s


def foreign_sessions(store: Store) -> list[str]:
    """The sessions of ``store`` that ``convlog demo`` did not record: anything but
    a demo session (its user prompt, at the demo's fixed clock) and forks of
    one. ``demo`` recreates its store only when this is empty, so imported
    sessions or a mailbox log are never deleted with it."""
    infos = list(store.sessions())
    demo: set[str] = set()
    for info in infos:
        if info.parent is not None:
            continue
        first = list(store.read(info.id, 1, 2))
        if (len(first) == 2 and isinstance(first[0], ev.MessageStarted)
                and first[0].role == "user"
                and DEMO_START_MS <= first[0].time < DEMO_START_MS + 1000
                and isinstance(first[1], ev.TextAdded) and first[1].text == DEMO_PROMPT):
            demo.add(info.id)
    grown = True
    while grown:  # forks of forks
        grown = False
        for info in infos:
            if info.id not in demo and info.parent in demo:
                demo.add(info.id)
                grown = True
    return [info.id for info in infos if info.id not in demo]
