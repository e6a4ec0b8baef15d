"""Capture a real Claude Code Agent Teams directory: ``python -m tests.realclients.teams``.

Claude Code writes ``~/.claude/teams/<team>/`` (``config.json`` and
``inboxes/<agent>.json``) only when teammates run as their own processes, that is
in an interactive session whose teammates live in tmux panes; ``-p`` keeps an
in-process team in memory and writes nothing. So this runs the real CLI
interactively inside a private tmux server, types one prompt (``[[team]]``: the
scripted model spawns a named teammate, messages it, and the teammate answers),
and watches the team directory every 5 ms. Claude Code empties an inbox once its
agent has taken the messages in, so every distinct state of the directory is
kept, in order, under ``tests/fixtures/agent-teams/claude-<version>/NN/``, and
the lead's and the teammate's transcripts under ``transcripts/`` (temporary
paths scrubbed as the other real-CLI fixtures are).

Needs ``tmux`` beside the CLI; the fixture is checked in, and the tests read it.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tests.realclients.clients import ROOT, find
from tests.realclients.generate import FAKE_KEY, _version, scrub
from tests.realclients.server import ScriptedServer

OUT = ROOT / "tests" / "fixtures" / "agent-teams"
KEY = FAKE_KEY + "-0123456789abcdef"  # long enough for the approval list's last 20


def _settings(home: Path, work: Path) -> None:
    """Skip the first-run screens: onboarding done, the folder trusted, the key approved."""
    (home / ".claude.json").write_text(json.dumps({
        "hasCompletedOnboarding": True, "theme": "dark", "numStartups": 3,
        "customApiKeyResponses": {"approved": [KEY[-20:]], "rejected": []},
        "projects": {str(work): {"hasTrustDialogAccepted": True,
                                 "hasCompletedProjectOnboarding": True,
                                 "allowedTools": ["Bash", "Agent", "SendMessage"]}}}))


class Watcher(threading.Thread):
    """Every distinct state of the team directories, in the order seen."""

    def __init__(self, teams: Path) -> None:
        super().__init__(daemon=True)
        self.teams = teams
        self.states: list[dict[str, str]] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            state: dict[str, str] = {}
            for path in sorted(self.teams.glob("*/**/*.json")):
                try:
                    state[str(path.relative_to(self.teams))] = path.read_text()
                except (OSError, UnicodeDecodeError):
                    continue  # being replaced: the next look sees it whole
            if state and (not self.states or self.states[-1] != state):
                self.states.append(state)
            time.sleep(0.005)


def capture(binary: Path, out: Path = OUT, timeout: float = 120.0, keep: bool = False) -> Path:
    root = Path(tempfile.mkdtemp(prefix="convlog-rc-teams-"))
    home, work = root / "home", root / "work"
    home.mkdir()
    work.mkdir()
    _settings(home, work)
    sock = f"convlog-teams-{os.getpid()}"
    try:
        with ScriptedServer(root / "server.jsonl") as server:
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
                   "ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": KEY,
                   "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
                   "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_EXPERIMENTAL_AGENT_TEAMS": "1",
                   "TERM": "xterm-256color", "LANG": "C.UTF-8"}
            version = _version(binary, env)
            watcher = Watcher(home / ".claude" / "teams")
            watcher.start()
            line = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
            subprocess.run(["tmux", "-L", sock, "new-session", "-d", "-x", "200", "-y", "50",
                            f"cd {shlex.quote(str(work))} && env -i {line} {binary} "
                            "--teammate-mode tmux --allowedTools Bash,Agent,SendMessage"],
                           check=True)
            time.sleep(8)  # the interactive screen is up
            subprocess.run(["tmux", "-L", sock, "send-keys", "-l", "[[team]] Start a team."],
                           check=True)
            time.sleep(1)
            subprocess.run(["tmux", "-L", sock, "send-keys", "Enter"], check=True)
            deadline = time.monotonic() + timeout
            # Done when the teammate's answer was served and the lead answered after it.
            while time.monotonic() < deadline and server.count < 7:
                time.sleep(0.5)
            time.sleep(3)
            watcher.done.set()
            watcher.join()
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], check=False, capture_output=True)
        # The teammates run in Claude Code's own tmux server (claude-swarm-<pid>).
        for swarm in Path(f"/tmp/tmux-{os.getuid()}").glob("claude-swarm-*"):
            subprocess.run(["tmux", "-S", str(swarm), "kill-server"], check=False,
                           capture_output=True)
    if not watcher.states:
        raise SystemExit(f"no team directory appeared ({server.count} requests served)")
    dest = out / f"claude-{version}"
    if dest.exists():
        shutil.rmtree(dest)
    for n, state in enumerate(watcher.states):
        for rel, text in state.items():
            target = dest / f"{n:02}" / scrub(rel, root)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(scrub(text, root))
    # The lead's and the teammate's own transcripts, for the importer's tests.
    for path in sorted((home / ".claude" / "projects").rglob("*.jsonl")):
        target = dest / "transcripts" / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(scrub(path.read_text(), root))
    if not keep:
        time.sleep(1)  # the killed teammates' last writes
        shutil.rmtree(root, ignore_errors=True)
    print(f"wrote {len(watcher.states)} states to {dest}")
    return dest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.realclients.teams")
    parser.add_argument("--keep", action="store_true",
                        help="keep the temporary home and the server's log")
    args = parser.parse_args(argv)
    binary, why = find("claude")
    if binary is None or shutil.which("tmux") is None:
        print(f"skip: {why or 'tmux is not installed'}", file=sys.stderr)
        return 1
    capture(binary, keep=args.keep)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
