"""What the scripted model answers: a step per request, chosen by a marker in the
latest prompt and by how many model turns already followed that prompt.

Provider-neutral: :mod:`tests.realclients.wire` reads each API's request into a
:class:`Turn` and writes a :class:`Reply` in that API's streaming format.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

MARKER = re.compile(r"\[\[([a-z]+)\]\]")

# Text that tells a CLI's own summarisation request from a prompt a person typed.
COMPACTION_HINTS = (
    "create a detailed summary",  # Claude Code /compact
    "CONTEXT CHECKPOINT COMPACTION",  # Codex
    "state_snapshot",  # Gemini CLI compression
    "summary of our conversation",  # OpenCode's compaction agent
    "Provide a detailed prompt for continuing",  # OpenCode's compaction agent
    "context summarization agent",  # OpenCode 1.18
)
SUMMARY = "Scripted summary: the session ran shell commands and a subagent."


@dataclass
class Result:
    call_id: str
    output: str
    is_error: bool | None = None


@dataclass
class Turn:
    """What the script needs of one request, whatever the API."""

    wire: str
    model: str
    prompt: str  # the latest prompt a person (or a parent agent) wrote
    rounds: int  # model turns already answered after that prompt
    results: list[Result] = field(default_factory=list)  # in the request's last message
    tools: list[str] = field(default_factory=list)
    namespaces: dict[str, str] = field(default_factory=dict)  # tool -> its namespace
    wants_json: bool = False  # a structured-output side call (Gemini's router)
    system: str = ""


@dataclass
class Call:
    id: str
    name: str
    input: dict[str, Any]
    custom: bool = False  # a Responses custom tool (raw text input)
    namespace: str = ""  # a Responses namespaced tool (Codex's multi_agent_v1)

    def arguments(self) -> str:
        return str(self.input["input"]) if self.custom else json.dumps(self.input)


@dataclass
class Reply:
    step: str
    text: str = ""
    thinking: str = ""
    calls: list[Call] = field(default_factory=list)
    error: str = ""  # an HTTP 400 with the provider's error body
    input_tokens: int = 0
    output_tokens: int = 0


SHELL_TOOLS = ("Bash", "exec_command", "shell", "run_shell_command", "bash", "shell_command")
AGENT_TOOLS = ("Task", "Agent", "spawn_agent", "task", "invoke_agent")


def _shell(turn: Turn, n: int, k: int, command: str) -> Call:
    """A shell call in the form the CLI's own shell tool takes."""
    name = next((t for t in SHELL_TOOLS if t in turn.tools), "shell")
    args: dict[str, Any]
    if name == "shell":
        args = {"command": ["bash", "-lc", command]}
    elif name == "exec_command":
        args = {"cmd": command}
    elif name in ("Bash", "bash"):
        args = {"command": command, "description": f"run {command.split(maxsplit=1)[0]}"}
    else:
        args = {"command": command}
    return Call(f"call_{n}_{k}", name, args)


def _agent(turn: Turn, n: int, task: str) -> Call | None:
    name = next((t for t in AGENT_TOOLS if t in turn.tools), None)
    if name is None:
        return None
    args: dict[str, Any]
    if name == "spawn_agent":
        args = {"message": task}
    elif name == "invoke_agent":
        args = {"agent_name": "generalist", "prompt": task}
    elif name == "task":
        args = {"description": "scripted subtask", "prompt": task, "subagent_type": "general"}
    else:
        args = {"description": "scripted subtask", "prompt": task,
                "subagent_type": "general-purpose"}
    return Call(f"call_{n}_0", name, args, namespace=turn.namespaces.get(name, ""))


def _wait(turn: Turn, n: int) -> Call | None:
    """Codex's spawn_agent answers at once with the agent's id: wait for it."""
    ids = [m.group(1) for r in turn.results
           for m in [re.search(r'"(?:agent_id|id)"\s*:\s*"([^"]+)"', r.output)] if m]
    if "wait_agent" not in turn.tools or not ids:
        return None
    return Call(f"call_{n}_0", "wait_agent", {"targets": ids[:1], "timeout_ms": 60000},
                namespace=turn.namespaces.get("wait_agent", ""))


def _team(turn: Turn, n: int, marker: str) -> Reply | None:
    """Claude Code Agent Teams: the lead spawns a named teammate, then messages it;
    the teammate answers the lead through SendMessage."""
    if "SendMessage" not in turn.tools:
        return None
    if marker == "team" and turn.rounds == 0 and "Agent" in turn.tools:
        return Reply("team", text=f"Spawning a teammate ({n}).", calls=[Call(
            f"call_{n}_0", "Agent", {
                "description": "scripted teammate", "name": "worker",
                "prompt": "[[mate]] Wait for the lead's message and answer it.",
                "subagent_type": "general-purpose", "run_in_background": True})])
    if marker == "team" and turn.rounds == 1:
        return Reply("team-send", calls=[Call(f"call_{n}_0", "SendMessage", {
            "to": "worker", "summary": "a question for the worker",
            "message": "[[answer]] What is two plus two?"})])
    if marker == "answer" and turn.rounds == 0:
        return Reply("mate-send", calls=[Call(f"call_{n}_0", "SendMessage", {
            "to": "team-lead", "summary": "the answer is four", "message": "Four."})])
    return None


def reply(turn: Turn, n: int) -> Reply:
    """The ``n``-th request's answer (``n`` makes every id unique within a run)."""
    out = _choose(turn, n)
    out.input_tokens = out.input_tokens or 1000 + 10 * n
    out.output_tokens = out.output_tokens or 20 + n
    return out


def _choose(turn: Turn, n: int) -> Reply:
    if turn.wants_json:
        return Reply("json", text=json.dumps({
            "reasoning": "scripted", "model_choice": "flash", "next_speaker": "user",
            "complexity_reasoning": "scripted", "complexity_score": 10}))
    if any(h in turn.prompt or h in turn.system for h in COMPACTION_HINTS):
        return Reply("compaction", text=SUMMARY)
    if "title" in turn.system.lower() and not turn.tools:
        return Reply("title", text="Scripted title")
    markers = MARKER.findall(turn.prompt)
    marker = markers[-1] if markers else "text"
    first = turn.rounds == 0
    if marker == "parallel" and first:
        return Reply("parallel", text=f"Running two commands at once ({n}).",
                     thinking=f"Two independent commands ({n}): run them in parallel.",
                     calls=[_shell(turn, n, 0, "echo alpha"), _shell(turn, n, 1, "echo beta")])
    if marker == "fail" and first:
        return Reply("fail", calls=[_shell(turn, n, 0, "cat /nonexistent/convlog-missing-file")])
    if marker == "sub" and first:
        return Reply("sub", calls=[_shell(turn, n, 0, "echo from-subagent")])
    if marker == "task" and first:
        call = _agent(turn, n, "[[sub]] Run one shell command and report its output.")
        if call is not None:
            return Reply("task", text=f"Delegating to a subagent ({n}).", calls=[call])
    if marker == "sub" and turn.rounds == 1 and "complete_task" in turn.tools:
        # Gemini CLI's subagents end by calling complete_task with their answer.
        return Reply("sub-complete", calls=[Call(f"call_{n}_0", "complete_task", {
            "result": {"response": f"Subagent answer {n}."}})])
    if marker == "task" and turn.rounds == 1:
        wait = _wait(turn, n)
        if wait is not None:
            return Reply("task-wait", calls=[wait])
    team = _team(turn, n, marker)
    if team is not None:
        return team
    if marker == "error" and first:
        return Reply("error", error="scripted invalid request: the prompt is refused")
    if marker == "bigtool" and first:  # the same, where a CLI checks within a turn
        return Reply("bigtool", calls=[_shell(turn, n, 0, "echo big")],
                     input_tokens=250_000 + n)
    if marker == "big" and first:  # usage past a compaction threshold
        return Reply("big", text=f"A long answer, number {n}.", input_tokens=250_000 + n)
    step = marker if not first else "text"
    seen = "; ".join(r.output.strip()[:60] for r in turn.results)
    return Reply(f"{step}-answer" if not first else "text",
                 text=f"Answer {n} to [[{marker}]]." + (f" Tools said: {seen}" if seen else ""),
                 thinking=f"Thinking {n}." if first else "")
