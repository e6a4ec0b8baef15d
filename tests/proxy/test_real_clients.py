"""The closed loop with the real CLIs: the CLI -> ``convlog proxy`` -> ``convlog replay``
serving a scripted session -> back.

Each test checks that the CLI completes its task against the replayed model,
that the proxy's record of the run equals the scripted session answer for
answer, event for event (ids, times and the tools' runs aside: the tool ran on
this machine), that every tool call the model made was settled with the result
the CLI sent back, and that what the CLI saved on disk, imported, holds the same
conversation as the proxy's record. Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from engine.importers.aider import plan_aider
from engine.importers.claude_code import plan_claude_code
from engine.importers.codex import plan_codex
from engine.importers.gemini import plan_gemini
from engine.importers.opencode import plan_opencode
from engine.importers.write import write_plan
from engine.store import MemoryStore, open_store
from tests.proxy import loop, scripted
from tests.proxy.clients import require
from tests.proxy.verbs import verb

JSON = dict[str, Any]
T = TypeVar("T")


def _base_env(home: Path) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
            "LANG": "C.UTF-8", "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}


def _check_record(script_db: str, proxy_db: str) -> tuple[Any, str]:
    """The proxy's record equals the scripted session; (the proxy store, its session)."""
    script = open_store(script_db, create=False)
    [scripted_session] = script.sessions()
    want = [loop.shape(a) for a in loop.answers(script, scripted_session.id)]
    script.close()
    proxy = open_store(proxy_db, create=False)
    [recorded] = [s for s in proxy.sessions() if s.parent is None]
    got = [loop.shape(a) for a in loop.answers(proxy, recorded.id)]
    assert got == want
    return proxy, recorded.id


def _direct_and_through(script_db: str, proxy_db: str, api: str,
                        run: Callable[[str, bool], T]) -> tuple[T, T]:
    """The CLI run against ``convlog replay`` of the script directly, then through
    ``convlog proxy`` in front of it (``run(base_url, proxied)``)."""
    with verb("replay", "--store", script_db, "--listen", "127.0.0.1:0") as (model, _):
        direct = run(model, False)
        with verb("proxy", "--store", proxy_db, "--listen", "127.0.0.1:0",
                  "--upstream", f"{api}={model}") as (proxy, _):
            through = run(proxy, True)
    return direct, through


def _anthropic_answer(blocks: list[JSON], stop: str, msg_id: str) -> list[JSON]:
    events: list[JSON] = [{"type": "message_start", "message": {
        "id": msg_id, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 100, "output_tokens": 1}}}]
    for i, block in enumerate(blocks):
        if block["type"] == "text":
            events += [{"type": "content_block_start", "index": i,
                        "content_block": {"type": "text", "text": ""}},
                       *({"type": "content_block_delta", "index": i,
                          "delta": {"type": "text_delta", "text": piece}}
                         for piece in (block["text"][:4], block["text"][4:]))]
        else:
            raw = json.dumps(block["input"])
            events += [{"type": "content_block_start", "index": i, "content_block": {
                **block, "input": {}}},
                *({"type": "content_block_delta", "index": i,
                   "delta": {"type": "input_json_delta", "partial_json": piece}}
                  for piece in (raw[:10], raw[10:]))]
        events.append({"type": "content_block_stop", "index": i})
    events += [{"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 25}},
               {"type": "message_stop"}]
    return events


def test_claude_code_closed_loop(tmp_path: Path) -> None:
    claude = require("claude")
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    prompt = "Create hello.txt containing hi"
    write = {"type": "tool_use", "id": "toolu_01WRITE", "name": "Write",
             "input": {"file_path": str(work / "hello.txt"), "content": "hi\n"}}
    calls = [
        scripted.Call({"messages": [{"role": "user", "content": prompt}]},
                      _anthropic_answer([{"type": "text", "text": "Writing the file."}, write],
                                        "tool_use", "msg_01SCRIPT1")),
        scripted.Call({"messages": [
            {"role": "user", "content": prompt},
            {"role": "assistant", "content": [{"type": "text", "text": "Writing the file."},
                                              write]},
            {"role": "user", "content": [{"type": "tool_result",
                                          "tool_use_id": "toolu_01WRITE", "content": ""}]}]},
            _anthropic_answer([{"type": "text", "text": "Done: hello.txt holds hi."}],
                              "end_turn", "msg_01SCRIPT2")),
    ]
    script_db, proxy_db = (f"sqlite:///{tmp_path / 'script.db'}",
                           f"sqlite:///{tmp_path / 'proxy.db'}")
    store = open_store(script_db)
    scripted.build(store, "anthropic", calls)
    store.close()
    def claude_run(base_url: str, run_home: Path) -> tuple[JSON, list[JSON]]:
        """The CLI's result line and the model turns it printed; hello.txt is checked."""
        (work / "hello.txt").unlink(missing_ok=True)
        run_home.mkdir(exist_ok=True)
        env = {**_base_env(run_home), "ANTHROPIC_BASE_URL": base_url,
               "ANTHROPIC_API_KEY": "sk-ant-never-stored-123",
               "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
               "DISABLE_AUTOUPDATER": "1"}
        run = subprocess.run([str(claude), "-p", prompt, "--output-format", "stream-json",
                              "--verbose", "--allowedTools", "Write"], cwd=work, env=env,
                             capture_output=True, text=True, timeout=180, check=False)
        assert run.returncode == 0, run.stderr[-2000:]
        lines = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
        [result] = [e for e in lines if e["type"] == "result"]
        assert (result["subtype"], result["result"]) == ("success", "Done: hello.txt holds hi.")
        assert (work / "hello.txt").read_text() == "hi\n"
        return result, [e["message"]["content"] for e in lines if e["type"] == "assistant"]

    direct, through = _direct_and_through(
        script_db, proxy_db, "anthropic",
        lambda url, proxied: claude_run(url, home if proxied else tmp_path / "home-direct")[1])
    assert through == direct  # the proxy changes nothing the CLI sees

    proxy_store, recorded = _check_record(script_db, proxy_db)
    proxied = loop.session_items(proxy_store, recorded)
    assert [i[0] for i in proxied] == ["text", "call", "result", "text"]
    assert proxied[2][:2] == ("result", "toolu_01WRITE")  # settled by what the CLI sent
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("proxy.db*"))
    assert b"sk-ant-never-stored-123" not in raw
    proxy_store.close()

    [project] = (home / ".claude" / "projects").iterdir()
    plan = plan_claude_code(project)
    imported = MemoryStore()
    write_plan(imported, plan)
    [main] = [s for s in plan.report.sessions if s.kind == "main"]
    assert loop.session_items(imported, main.id) == proxied

    # VCR: the proxy's own recording, replayed, runs the CLI through the task again.
    with verb("replay", "--store", proxy_db, "--session", recorded, "--listen",
              "127.0.0.1:0") as (again, _):
        _, replayed = claude_run(again, tmp_path / "home-again")
    assert replayed == direct


def _responses_answer(resp_id: str, *, text: str | None = None,
                      call: JSON | None = None) -> list[JSON]:
    base = {"id": resp_id, "object": "response", "created_at": 1700000000,
            "model": "fake-model", "output": []}
    events: list[JSON] = [{"type": "response.created",
                           "response": {**base, "status": "in_progress"}}]
    output: list[JSON] = []
    if text is not None:
        ref = {"item_id": f"msg_{resp_id}", "output_index": 0, "content_index": 0}
        part = {"type": "output_text", "text": text, "annotations": []}
        item = {"id": f"msg_{resp_id}", "type": "message", "role": "assistant",
                "status": "completed", "content": [part]}
        events += [
            {"type": "response.output_item.added", "output_index": 0,
             "item": {**item, "status": "in_progress", "content": []}},
            {"type": "response.content_part.added", **ref, "part": {**part, "text": ""}},
            {"type": "response.output_text.delta", **ref, "delta": text[:4]},
            {"type": "response.output_text.delta", **ref, "delta": text[4:]},
            {"type": "response.output_text.done", **ref, "text": text},
            {"type": "response.content_part.done", **ref, "part": part},
            {"type": "response.output_item.done", "output_index": 0, "item": item}]
        output.append(item)
    if call is not None:
        index = len(output)
        item = {"id": f"fc_{resp_id}", "type": "function_call", "status": "completed",
                **call}
        events += [
            {"type": "response.output_item.added", "output_index": index,
             "item": {**item, "arguments": "", "status": "in_progress"}},
            {"type": "response.function_call_arguments.delta", "item_id": item["id"],
             "output_index": index, "delta": call["arguments"][:6]},
            {"type": "response.function_call_arguments.delta", "item_id": item["id"],
             "output_index": index, "delta": call["arguments"][6:]},
            {"type": "response.function_call_arguments.done", "item_id": item["id"],
             "output_index": index, "arguments": call["arguments"]},
            {"type": "response.output_item.done", "output_index": index, "item": item}]
        output.append(item)
    events.append({"type": "response.completed", "response": {
        **base, "status": "completed", "output": output,
        "usage": {"input_tokens": 50, "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": 60}}})
    for n, e in enumerate(events):
        e["sequence_number"] = n
    return events


def test_codex_closed_loop(tmp_path: Path) -> None:
    codex = require("codex")
    work, home, codex_home = tmp_path / "work", tmp_path / "home", tmp_path / "codex"
    for d in (work, home, codex_home):
        d.mkdir()
    (work / "notes.txt").write_text("the meeting is at noon\n")
    prompt = "What does notes.txt say?"
    call = {"call_id": "call_READ1", "name": "exec_command",
            "arguments": json.dumps({"cmd": "cat notes.txt"})}
    user = {"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": prompt}]}
    calls = [
        scripted.Call({"input": [user]}, _responses_answer("resp_1", call=call)),
        scripted.Call({"input": [user, {"type": "function_call", **call},
                                 {"type": "function_call_output", "call_id": "call_READ1",
                                  "output": ""}]},
                      _responses_answer("resp_2", text="It says the meeting is at noon.")),
    ]
    script_db, proxy_db = (f"sqlite:///{tmp_path / 'script.db'}",
                           f"sqlite:///{tmp_path / 'proxy.db'}")
    store = open_store(script_db)
    scripted.build(store, "openai-responses", calls, path="/v1/responses")
    store.close()
    def codex_run(base_url: str, run_home: Path) -> list[JSON]:
        """The items the CLI printed (ids aside); the answer is checked."""
        run_home.mkdir(exist_ok=True)
        (run_home / "config.toml").write_text(
            'model = "fake-model"\nmodel_provider = "fake"\n'
            '[model_providers.fake]\nname = "fake"\n'
            f'base_url = "{base_url}/v1"\nwire_api = "responses"\nenv_key = "FAKE_KEY"\n')
        env = {**_base_env(home), "CODEX_HOME": str(run_home),
               "FAKE_KEY": "sk-proj-never-stored-456"}
        run = subprocess.run([str(codex), "exec", "--json", "--skip-git-repo-check", prompt],
                             cwd=work, env=env, capture_output=True, text=True, timeout=180,
                             check=False, stdin=subprocess.DEVNULL)
        assert run.returncode == 0, run.stderr[-2000:]
        lines = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
        items = [{k: val for k, val in e["item"].items() if k != "id"} for e in lines
                 if e.get("type") == "item.completed"]
        said = [i["text"] for i in items if i.get("type") == "agent_message"]
        assert said == ["It says the meeting is at noon."]
        return items

    direct, through = _direct_and_through(
        script_db, proxy_db, "openai",
        lambda url, proxied: codex_run(url, codex_home if proxied
                                       else tmp_path / "codex-direct"))
    assert through == direct  # the proxy changes nothing the CLI sees

    proxy_store, recorded = _check_record(script_db, proxy_db)
    proxied = loop.session_items(proxy_store, recorded)
    assert [i[0] for i in proxied] == ["call", "result", "text"]
    assert "the meeting is at noon" in proxied[1][2]  # the CLI really ran cat
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("proxy.db*"))
    assert b"sk-proj-never-stored-456" not in raw
    proxy_store.close()

    plan = plan_codex(codex_home / "sessions")
    imported = MemoryStore()
    write_plan(imported, plan)
    [session] = plan.sessions
    assert loop.session_items(imported, session.id) == proxied


def _gemini_chunk(parts: list[JSON], **extra: Any) -> JSON:
    return {"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0,
                            **extra}], "modelVersion": "gemini-2.5-pro", "responseId": "r"}


def test_gemini_cli_closed_loop(tmp_path: Path) -> None:
    gemini = require("gemini")
    work, home = tmp_path / "work", tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    work.mkdir()
    (home / ".gemini" / "settings.json").write_text(json.dumps(
        {"security": {"auth": {"selectedType": "gemini-api-key"}}}))
    (work / "notes.txt").write_text("the meeting is at noon\n")
    prompt = "What does notes.txt say?"
    call = {"name": "read_file", "args": {"file_path": "notes.txt"}, "id": "call_G1"}
    usage = {"promptTokenCount": 20, "candidatesTokenCount": 5, "totalTokenCount": 25}
    user = {"role": "user", "parts": [{"text": prompt}]}
    calls = [
        scripted.Call({"contents": [user]}, [
            _gemini_chunk([{"text": "Reading it."}]),
            _gemini_chunk([{"functionCall": call}], finishReason="STOP"),
            {**_gemini_chunk([]), "usageMetadata": usage}]),
        scripted.Call({"contents": [
            user, {"role": "model", "parts": [{"text": "Reading it."},
                                              {"functionCall": call}]},
            {"role": "user", "parts": [{"functionResponse": {
                "id": "call_G1", "name": "read_file", "response": {"output": ""}}}]}]},
            [_gemini_chunk([{"text": "It says the meeting "}]),
             _gemini_chunk([{"text": "is at noon."}], finishReason="STOP"),
             {**_gemini_chunk([]), "usageMetadata": usage}]),
    ]
    script_db, proxy_db = (f"sqlite:///{tmp_path / 'script.db'}",
                           f"sqlite:///{tmp_path / 'proxy.db'}")
    store = open_store(script_db)
    scripted.build(store, "gemini", calls,
                   path="/v1beta/models/gemini-2.5-pro:streamGenerateContent")
    store.close()
    def gemini_run(base_url: str, run_home: Path) -> list[JSON]:
        """What the CLI printed of the turn (ids and times aside)."""
        (run_home / ".gemini").mkdir(parents=True, exist_ok=True)
        (run_home / ".gemini" / "settings.json").write_text(json.dumps(
            {"security": {"auth": {"selectedType": "gemini-api-key"}}}))
        env = {**_base_env(run_home), "GOOGLE_GEMINI_BASE_URL": base_url,
               "GEMINI_API_KEY": "AIza-never-stored-789", "GEMINI_CLI_TRUST_WORKSPACE": "true"}
        # An explicit model: no router calls (they would need answers of their own).
        run = subprocess.run([str(gemini), "--yolo", "--output-format", "stream-json", "-m",
                              "gemini-2.5-pro", "-p", prompt], cwd=work, env=env,
                             capture_output=True, text=True, timeout=180, check=False,
                             stdin=subprocess.DEVNULL)
        assert run.returncode == 0, run.stderr[-2000:]
        lines = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
        said = "".join(e["content"] for e in lines
                       if e.get("type") == "message" and e.get("role") == "assistant")
        assert said.endswith("It says the meeting is at noon.")
        assert lines[-1]["type"] == "result"
        assert lines[-1]["status"] == "success"
        return [{k: e.get(k) for k in ("type", "role", "content", "tool_name", "parameters",
                                       "status", "output")}
                for e in lines if e.get("type") in ("message", "tool_use", "tool_result")]

    direct, through = _direct_and_through(
        script_db, proxy_db, "gemini",
        lambda url, proxied: gemini_run(url, home if proxied else tmp_path / "home-direct"))
    assert through == direct  # the proxy changes nothing the CLI sees

    proxy_store, recorded = _check_record(script_db, proxy_db)
    proxied = loop.session_items(proxy_store, recorded)
    assert [i[0] for i in proxied] == ["text", "call", "result", "text"]
    assert "the meeting is at noon" in proxied[2][2]  # the CLI really read the file
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("proxy.db*"))
    assert b"AIza-never-stored-789" not in raw
    proxy_store.close()

    plan = plan_gemini(home / ".gemini" / "tmp")
    imported = MemoryStore()
    write_plan(imported, plan)
    # The importer reads this file as an empty main session and a fork holding the turn
    # (its reading, noted for the importers); the turn is what is compared. It names
    # a call NAME__ID.
    [got] = [items for s in plan.sessions if (items := loop.session_items(imported, s.id))]
    unprefixed = [(i[0], i[1].removeprefix("read_file__"), *i[2:]) if i[0] != "text" else i
                  for i in got]
    assert unprefixed == proxied


def test_aider_closed_loop(tmp_path: Path) -> None:
    aider = require("aider")
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    prompt = "Create hello.txt containing hi"
    answer = "I will create it.\n\nhello.txt\n```\nhi\n```\n"
    chunks: list[JSON] = [{"id": "chatcmpl-1", "object": "chat.completion.chunk",
                           "created": 1700000000, "model": "fake", "system_fingerprint": None,
                           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
                          for delta, finish in (({"role": "assistant", "content": ""}, None),
                                                ({"content": answer[:10]}, None),
                                                ({"content": answer[10:]}, None),
                                                ({}, "stop"))]
    # aider sends its format's example exchange first: three model turns to match.
    example_turns = [{"role": "assistant", "content": ""}] * 3
    calls = [scripted.Call({"messages": [*example_turns,
                                         {"role": "user", "content": prompt}]}, chunks)]
    script_db, proxy_db = (f"sqlite:///{tmp_path / 'script.db'}",
                           f"sqlite:///{tmp_path / 'proxy.db'}")
    store = open_store(script_db)
    scripted.build(store, "openai-chat", calls, path="/v1/chat/completions")
    store.close()
    def aider_run(base_url: str, run_work: Path, run_home: Path) -> list[str]:
        """The chat history aider wrote (its start-time lines aside); hello.txt is
        checked. A home each: aider notes there that it showed its release notes."""
        run_work.mkdir(exist_ok=True)
        run_home.mkdir(exist_ok=True)
        env = {**_base_env(run_home), "OPENAI_API_KEY": "sk-never-stored-aider",
               "LITELLM_LOCAL_MODEL_COST_MAP": "True"}  # no fetch of the price list
        run = subprocess.run([str(aider), "--openai-api-base", f"{base_url}/v1", "--model",
                              "openai/fake", "--edit-format", "whole", "--no-git",
                              "--yes-always", "--no-check-update", "--no-show-model-warnings",
                              "--no-analytics", "--stream", "--message", prompt],
                             cwd=run_work, env=env, capture_output=True, text=True,
                             timeout=180, check=False, stdin=subprocess.DEVNULL)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        assert (run_work / "hello.txt").read_text() == "hi\n"
        history = (run_work / ".aider.chat.history.md").read_text()
        return [line.replace(base_url, "BASE") for line in history.splitlines()
                if not line.startswith("# aider chat started at")]

    direct, through = _direct_and_through(
        script_db, proxy_db, "openai",
        lambda url, proxied: aider_run(url, work, home) if proxied else aider_run(
            url, tmp_path / "work-direct", tmp_path / "home-direct"))
    assert through == direct  # the proxy changes nothing the CLI does

    proxy_store, recorded = _check_record(script_db, proxy_db)
    proxied = loop.session_items(proxy_store, recorded)
    assert proxied == [("text", answer)]
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("proxy.db*"))
    assert b"sk-never-stored-aider" not in raw
    proxy_store.close()

    plan = plan_aider(work / ".aider.chat.history.md")
    imported = MemoryStore()
    write_plan(imported, plan)
    [session] = plan.sessions
    [(kind, text)] = loop.session_items(imported, session.id)
    assert kind == "text"
    assert text.strip() == answer.strip()


def _chat_answer(resp_id: str, *, text: str | None = None, call: JSON | None = None
                 ) -> list[JSON]:
    base = {"id": resp_id, "object": "chat.completion.chunk", "created": 1700000000,
            "model": "fake-model", "system_fingerprint": None}

    def chunk(delta: JSON, finish: str | None = None) -> JSON:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out = [chunk({"role": "assistant", "content": ""})]
    if text is not None:
        out += [chunk({"content": text[:5]}), chunk({"content": text[5:]})]
    if call is not None:
        out += [chunk({"tool_calls": [{"index": 0, "id": call["id"], "type": "function",
                                       "function": {"name": call["name"], "arguments": ""}}]}),
                chunk({"tool_calls": [{"index": 0,
                                       "function": {"arguments": call["arguments"]}}]})]
    out.append(chunk({}, "tool_calls" if call is not None else "stop"))
    out.append({**base, "choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 5,
                                                 "total_tokens": 35}})
    return out


def test_opencode_closed_loop(tmp_path: Path) -> None:
    opencode = require("opencode")
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    (work / "notes.txt").write_text("the meeting is at noon\n")
    prompt = "What does notes.txt say?"
    call = {"id": "call_OC1", "name": "read",
            "arguments": json.dumps({"filePath": str(work / "notes.txt")})}
    user = {"role": "user", "content": prompt}
    calls = [
        scripted.Call({"messages": [user], "tools": [{}]}, _chat_answer("c1", call=call)),
        scripted.Call({"messages": [
            user, {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_OC1", "type": "function",
                 "function": {"name": "read", "arguments": call["arguments"]}}]},
            {"role": "tool", "tool_call_id": "call_OC1", "content": ""}], "tools": [{}]},
            _chat_answer("c2", text="It says the meeting is at noon.")),
    ]
    script_db, proxy_db = (f"sqlite:///{tmp_path / 'script.db'}",
                           f"sqlite:///{tmp_path / 'proxy.db'}")
    store = open_store(script_db)
    scripted.build(store, "openai-chat", calls, path="/v1/chat/completions")
    store.close()
    def opencode_run(base_url: str, run_home: Path) -> list[tuple[Any, ...]]:
        """The parts the CLI printed (ids and times aside)."""
        run_home.mkdir(exist_ok=True)
        (work / "opencode.json").write_text(json.dumps({
            "provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "Fake",
                                  "options": {"baseURL": f"{base_url}/v1",
                                              "apiKey": "sk-oc-never-stored"},
                                  "models": {"fake-model": {"name": "Fake"}}}},
            "model": "fake/fake-model"}))
        run = subprocess.run([str(opencode), "run", "--format", "json", prompt], cwd=work,
                             env=_base_env(run_home), capture_output=True, text=True,
                             timeout=300, check=False, stdin=subprocess.DEVNULL)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        lines = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
        texts = [e["part"]["text"] for e in lines if e.get("type") == "text"]
        assert texts == ["It says the meeting is at noon."]
        parts = [e["part"] for e in lines if isinstance(e.get("part"), dict)]
        return [(p.get("type"), p.get("text"), p.get("tool"),
                 (p.get("state") or {}).get("input"), (p.get("state") or {}).get("output"))
                for p in parts]

    direct, through = _direct_and_through(
        script_db, proxy_db, "openai",
        lambda url, proxied: opencode_run(url, home if proxied else tmp_path / "home-direct"))
    assert through == direct  # the proxy changes nothing the CLI sees

    proxy_store, recorded = _check_record(script_db, proxy_db)
    proxied = loop.session_items(proxy_store, recorded)
    assert [i[0] for i in proxied] == ["call", "result", "text"]
    assert "the meeting is at noon" in proxied[1][2]  # the CLI really read the file
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("proxy.db*"))
    assert b"sk-oc-never-stored" not in raw
    proxy_store.close()

    plan = plan_opencode(home / ".local" / "share" / "opencode")
    imported = MemoryStore()
    write_plan(imported, plan)
    [got] = [items for s in plan.sessions if (items := loop.session_items(imported, s.id))]
    assert [i for i in got if i[0] != "result"] == [i for i in proxied if i[0] != "result"]
    [(_, call_id, output)] = [i for i in got if i[0] == "result"]
    assert call_id == "call_OC1"
    assert "the meeting is at noon" in output
