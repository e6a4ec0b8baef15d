"""Regenerate the real-CLI fixtures: ``python -m tests.realclients.generate [TOOL ...]``.

Each CLI runs in a fresh temporary HOME (and CODEX_HOME) against the scripted
server (:mod:`tests.realclients.server`) through the scripted turns of its flow
below; then what it wrote (its transcripts), the server's log and the steps run
(``steps.json``) are copied, scrubbed of the temporary paths and of anything that
looks like a secret, to ``tests/fixtures/real-cli/<tool>-<version>/``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.realclients.clients import ROOT, find
from tests.realclients.server import ScriptedServer

FIXTURES = ROOT / "tests" / "fixtures" / "real-cli"
HOME_PLACEHOLDER = "/home/dev"
FAKE_KEY = "scripted-fake-key"
SECRET = re.compile(r"\b(sk-[A-Za-z0-9_-]{16,}|AIza[0-9A-Za-z_-]{20,}|ghp_[A-Za-z0-9]{20,})")
TIMEOUT = 240  # seconds per CLI run; the scripted model answers at once


class Run:
    """One CLI's generation: its temporary home, the server, the steps it ran."""

    def __init__(self, tool: str, binary: Path, root: Path, server: ScriptedServer) -> None:
        self.tool = tool
        self.binary = binary
        self.root = root
        self.home = root / "home"
        self.work = root / "work"
        self.home.mkdir()
        self.work.mkdir()
        self.server = server
        self.steps: list[dict[str, Any]] = []
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home),
            "LANG": "C.UTF-8", "TERM": "dumb", "NO_COLOR": "1", "CI": "1",
            "USER": "dev", "SHELL": "/bin/bash", "TMPDIR": str(root / "tmp"),
        }
        (root / "tmp").mkdir()

    def run(self, label: str, args: list[str], prompt: str | None, *, session: str,
            fork_of: str | None = None, stdin: str | None = None,
            env: dict[str, str] | None = None,
            binary: Path | None = None) -> subprocess.CompletedProcess[str]:
        """Run the CLI once. ``session`` names the conversation the step belongs to
        (the tests' expected structure), ``fork_of`` the one it forks."""
        argv = [str(binary or self.binary), *args] + ([prompt] if prompt is not None else [])
        started = time.monotonic()
        done = subprocess.run(argv, cwd=self.work, env={**self.env, **(env or {})},
                              input=stdin if stdin is not None else "", capture_output=True,
                              text=True, timeout=TIMEOUT, check=False)
        self.steps.append({
            "label": label, "session": session, "fork_of": fork_of,
            "args": args, "prompt": prompt, "stdin": stdin,
            "exit": done.returncode, "seconds": round(time.monotonic() - started, 1),
            "requests_so_far": self.server.count,
            "sessions": sorted(set(re.findall(
                r'"(?:session_id|thread_id|sessionID|session)"\s*:\s*"([0-9a-zA-Z_-]{8,})"',
                done.stdout))),
        })
        (self.root / "out").mkdir(exist_ok=True)
        (self.root / "out" / f"{len(self.steps):02}-{label}.stdout").write_text(done.stdout)
        (self.root / "out" / f"{len(self.steps):02}-{label}.stderr").write_text(done.stderr)
        print(f"  {self.tool} {label}: exit {done.returncode} "
              f"({self.steps[-1]['seconds']} s, {self.server.count} requests)", flush=True)
        return done


# --- the flows: one per CLI -------------------------------------------------------

def claude_flow(r: Run) -> None:
    r.env.update({"ANTHROPIC_BASE_URL": r.server.url, "ANTHROPIC_API_KEY": FAKE_KEY,
                  "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
                  "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1"})
    base = ["-p", "--output-format", "stream-json", "--verbose",
            "--allowedTools=Bash,Read,Write,Task,Agent"]
    first = r.run("parallel", base, "[[parallel]] Run two shell commands at once.",
                  session="main")
    session = _first_session(first.stdout)
    cont = [*base, "--continue"]
    r.run("fail", cont, "[[fail]] Show the missing file.", session="main")
    r.run("task", cont, "[[task]] Hand this to a subagent.", session="main")
    r.run("compact", cont, "/compact", session="main")
    r.run("after-compact", cont, "[[text]] Anything left after the summary?", session="main")
    fork = r.run("fork", [*base, "--resume", session, "--fork-session"],
                 "[[text]] A question in the fork.", session="fork", fork_of="main")
    forked = _first_session(fork.stdout)
    r.run("error", [*base, "--resume", forked], "[[error]] This prompt is refused.",
          session="fork")
    # A queued prompt: the second message arrives on stdin while the first one works.
    stream = "".join(json.dumps({"type": "user", "message": {"role": "user", "content": [
        {"type": "text", "text": text}]}}) + "\n" for text in (
        "[[parallel]] First of two prompts sent at once.", "[[text]] The queued second prompt."))
    r.run("queued", ["-p", "--input-format", "stream-json", "--output-format", "stream-json",
                     "--verbose", "--allowedTools=Bash"], None, stdin=stream, session="queued")


def codex_flow(r: Run) -> None:
    codex_home = r.home / ".codex"
    codex_home.mkdir(exist_ok=True)
    (codex_home / "config.toml").write_text(
        'model = "scripted-model"\nmodel_provider = "fake"\n'
        'approval_policy = "never"\nsandbox_mode = "danger-full-access"\n'
        '[model_providers.fake]\nname = "fake"\n'
        f'base_url = "{r.server.url}/v1"\nwire_api = "responses"\nenv_key = "FAKE_KEY"\n')
    r.env.update({"CODEX_HOME": str(codex_home), "FAKE_KEY": FAKE_KEY})
    base = ["exec", "--json", "--skip-git-repo-check"]
    first = r.run("parallel", base, "[[parallel]] Run two shell commands at once.",
                  session="main")
    thread = _first_session(first.stdout)
    resume = ["exec", "resume", "--json", "--skip-git-repo-check", "--last"]
    r.run("fail", resume, "[[fail]] Show the missing file.", session="main")
    r.run("task", resume, "[[task]] Hand this to a subagent.", session="main")
    # The scripted usage of [[big]] passes this limit: the next turn compacts first.
    compact = [*resume, "-c", "model_auto_compact_token_limit=200000"]
    r.run("big", compact, "[[big]] A turn whose usage passes the compaction limit.",
          session="main")
    r.run("after-compact", compact, "[[text]] Anything left after the summary?",
          session="main")
    r.run("fork", ["exec", "fork", "--json", "--skip-git-repo-check", thread],
          "[[text]] A question in the fork.", session="fork", fork_of="main")
    r.run("error", resume, "[[error]] This prompt is refused.", session="fork")


def gemini_flow(r: Run) -> None:
    settings = r.home / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    # Compression when a request's prompt passes 20% of the context window: the
    # scripted usage of [[big]] (250,000 tokens) does.
    settings.write_text(json.dumps({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "model": {"compressionThreshold": 0.2},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False}}))
    r.env.update({"GOOGLE_GEMINI_BASE_URL": r.server.url, "GEMINI_API_KEY": FAKE_KEY,
                  "GEMINI_CLI_TRUST_WORKSPACE": "true"})
    base = ["--yolo", "--output-format", "stream-json"]
    resume = [*base, "--resume", "latest"]
    r.run("parallel", [*base, "-p"], "[[parallel]] Run two shell commands at once.",
          session="main")
    r.run("fail", [*resume, "-p"], "[[fail]] Show the missing file.", session="main")
    r.run("task", [*resume, "-p"], "[[task]] Hand this to a subagent.", session="main")
    # Gemini CLI checks the last request's usage before each request of a turn.
    r.run("big", [*resume, "-p"], "[[bigtool]] A turn whose usage passes the compression "
          "limit.", session="main")
    r.run("after-compact", [*resume, "-p"], "[[text]] Anything left after the summary?",
          session="main")
    r.run("error", [*resume, "-p"], "[[error]] This prompt is refused.", session="main")


def opencode_flow(r: Run) -> None:
    config = {
        "$schema": "https://opencode.ai/config.json", "autoupdate": False, "share": "disabled",
        "model": "fake/scripted-model", "small_model": "fake/scripted-model",
        "permission": {"bash": "allow", "edit": "allow", "webfetch": "deny"},
        "provider": {"fake": {
            "npm": "@ai-sdk/openai-compatible", "name": "Scripted",
            "options": {"baseURL": f"{r.server.url}/v1", "apiKey": FAKE_KEY},
            "models": {"scripted-model": {"name": "Scripted model"}}}}}
    (r.work / "opencode.json").write_text(json.dumps(config, indent=1))
    r.env.update({"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
                  "OPENCODE_DISABLE_SHARE": "1"})
    base = ["run", "--format", "json", "--auto"]
    first = r.run("parallel", base, "[[parallel]] Run two shell commands at once.",
                  session="main")
    session = _first_session(first.stdout)
    r.run("fail", [*base, "-c"], "[[fail]] Show the missing file.", session="main")
    r.run("task", [*base, "-c"], "[[task]] Hand this to a subagent.", session="main")
    _opencode_compact(r, session)
    r.run("after-compact", [*base, "-c"], "[[text]] Anything left after the summary?",
          session="main")
    r.run("fork", [*base, "-s", session, "--fork"], "[[text]] A question in the fork.",
          session="fork", fork_of="main")
    r.run("error", [*base, "-c"], "[[error]] This prompt is refused.", session="fork")
    exports = r.root / "exports"
    exports.mkdir()
    for sid in _opencode_sessions(r.home):
        done = subprocess.run([str(r.binary), "export", sid], cwd=r.work, env=r.env,
                              capture_output=True, text=True, timeout=TIMEOUT, check=True)
        start = done.stdout.index("{")  # it may print a notice first
        (exports / f"{sid}.json").write_text(done.stdout[start:])


def _opencode_compact(r: Run, session: str) -> None:
    """`opencode run --command compact` fails; its server's summarize route works."""
    server = subprocess.Popen([str(r.binary), "serve", "--port", "0", "--hostname",
                               "127.0.0.1"], cwd=r.work, env=r.env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        assert server.stdout is not None
        url = ""
        deadline = time.monotonic() + TIMEOUT
        while not url and time.monotonic() < deadline:
            line = server.stdout.readline()
            if not line:
                break
            m = re.search(r"http://127\.0\.0\.1:\d+", line)
            url = m.group(0) if m else ""
        if not url:
            raise RuntimeError("opencode serve printed no address")
        body = json.dumps({"providerID": "fake", "modelID": "scripted-model"}).encode()
        request = urllib.request.Request(f"{url}/session/{session}/summarize", data=body,
                                         headers={"content-type": "application/json"})
        started = time.monotonic()
        with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
            status = answer.status
        r.steps.append({"label": "compact", "session": "main", "fork_of": None,
                        "args": ["serve", "POST /session/ID/summarize"], "prompt": None,
                        "stdin": None, "exit": 0 if status == 200 else status,
                        "seconds": round(time.monotonic() - started, 1),
                        "requests_so_far": r.server.count, "sessions": [session]})
        print(f"  opencode compact: HTTP {status} ({r.server.count} requests)", flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)


def _opencode_sessions(home: Path) -> list[str]:
    db = home / ".local" / "share" / "opencode" / "opencode.db"
    with sqlite3.connect(db) as conn:
        return [row[0] for row in conn.execute("select id from session order by id")]


def aider_flow(r: Run) -> None:
    r.env.update({"OPENAI_API_KEY": FAKE_KEY, "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                  "AIDER_CHECK_UPDATE": "false", "AIDER_ANALYTICS": "false"})
    base = ["--openai-api-base", f"{r.server.url}/v1", "--model", "openai/scripted-model",
            "--edit-format", "diff", "--yes-always", "--no-git", "--no-auto-commits",
            "--no-check-update", "--no-show-release-notes", "--no-analytics",
            "--no-pretty", "--no-fancy-input", "--map-tokens", "0"]
    r.run("text", [*base, "--stream", "--message"], "[[text]] Say something, streamed.",
          session="main")
    r.run("restore", [*base, "--no-stream", "--restore-chat-history", "--message"],
          "[[text]] And again, not streamed.", session="main")
    r.run("error", [*base, "--stream", "--restore-chat-history", "--message"],
          "[[error]] This prompt is refused.", session="main")


FLOWS: dict[str, tuple[str, Callable[[Run], None]]] = {
    "claude": ("claude-code", claude_flow),
    "codex": ("codex", codex_flow),
    "gemini": ("gemini-cli", gemini_flow),
    "opencode": ("opencode", opencode_flow),
    "aider": ("aider", aider_flow),
}


def _first_session(stdout: str) -> str:
    for line in stdout.splitlines():
        m = re.search(r'"(?:session_id|thread_id|sessionID)"\s*:\s*"([0-9a-f-]{36}|ses_\w+)"',
                      line)
        if m:
            return m.group(1)
    raise RuntimeError(f"no session id in the CLI's output: {stdout[-2000:]!r}")


# --- copying what the CLI wrote ------------------------------------------------------

TRANSCRIPTS = {  # where each CLI's sessions are, under the temporary root
    "claude": "home/.claude/projects",
    "codex": "home/.codex/sessions",
    "gemini": "home/.gemini/tmp",
    "opencode": "exports",  # `opencode export` of each session
    "aider": "work",  # its .aider.chat.history.md (the other files are not sessions)
}


def _version(binary: Path, env: dict[str, str]) -> str:
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                         env=env, timeout=60, check=False).stdout
    m = re.search(r"\d+\.\d+\.\d+", out)
    return m.group(0) if m else "unknown"


def scrub(text: str, root: Path) -> str:
    """The temporary paths (and Claude Code's slug of them) become fixed ones; anything
    shaped like a key becomes ``REDACTED``."""
    for form in (str(root), str(root.resolve())):
        text = text.replace(form, HOME_PLACEHOLDER)
        text = text.replace(_slug(form), _slug(HOME_PLACEHOLDER))
        # OpenCode's export keeps the project path without its leading slash
        text = text.replace(form.lstrip("/"), HOME_PLACEHOLDER.lstrip("/"))
    return SECRET.sub("REDACTED", text)


def _slug(path: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "-", path)


def copy_out(run: Run, dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    src = run.root / TRANSCRIPTS[run.tool]
    for path in sorted(p for p in src.rglob("*") if p.is_file()
                       and (run.tool != "aider" or p.name == ".aider.chat.history.md")):
        rel = scrub(str(path.relative_to(src)), run.root)
        target = dest / "transcripts" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(scrub(path.read_text(errors="surrogateescape"), run.root))
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "server.jsonl").write_text(scrub(run.server.log_path.read_text(), run.root))
    steps = json.loads(scrub(json.dumps(run.steps), run.root))
    (dest / "steps.json").write_text(json.dumps(steps, indent=1) + "\n")


def generate(tool: str, keep: bool = False, out: Path = FIXTURES) -> Path | None:
    """Run ``tool``'s flow and write its fixture under ``out``; None when not installed."""
    binary, why = find(tool)
    if binary is None:
        print(f"skip {tool}: {why}", file=sys.stderr)
        return None
    name, flow = FLOWS[tool]
    root = Path(tempfile.mkdtemp(prefix=f"convlog-rc-{tool}-"))
    try:
        with ScriptedServer(root / "server.jsonl", bodies_dir=root / "bodies") as server:
            run = Run(tool, binary, root, server)
            version = _version(binary, run.env)
            print(f"{tool} {version} in {root}", flush=True)
            flow(run)
        dest = out / f"{name}-{version}"
        copy_out(run, dest)
        print(f"wrote {dest}", flush=True)
        return dest
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.realclients.generate")
    parser.add_argument("tools", nargs="*", help=f"some of {', '.join(FLOWS)} (default: all)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the temporary home (request bodies, CLI output)")
    args = parser.parse_args(argv)
    unknown = set(args.tools) - set(FLOWS)
    if unknown:
        parser.error(f"unknown tool(s): {', '.join(sorted(unknown))}")
    for tool in args.tools or list(FLOWS):
        generate(tool, keep=args.keep)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
