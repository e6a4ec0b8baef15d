"""OpenCode's ``--fork`` copies the original's messages under new ids and names no
original: a session whose first messages copy another's is a fork of it at the shared
messages, holding only what it added (it imported as an unrelated main session that
repeated the original's turns)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine import events as ev
from engine.importers.detect import plan_path
from projections import views as v
from projections.timetravel import at
from tests.importers.support import written

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real-cli" / "opencode-1.18.33"


def _message(session: str, n: int, role: str, text: str, created: int) -> dict[str, Any]:
    mid = f"msg_{session}_{n:03d}"
    info: dict[str, Any] = {"id": mid, "sessionID": session, "role": role,
                            "time": {"created": created}}
    if role == "assistant":
        info.update({"parentID": f"msg_{session}_{n - 1:03d}", "modelID": "m",
                     "providerID": "p", "time": {"created": created,
                                                 "completed": created + 1}})
    return {"info": info, "parts": [{"id": f"prt_{session}_{n:03d}", "sessionID": session,
                                     "messageID": mid, "type": "text", "text": text}]}


def _export(session: str, created: int, turns: list[tuple[str, int]],
            title: str = "t") -> dict[str, Any]:
    """A session of (prompt, time) turns, each a user message and its answer."""
    messages = []
    for i, (prompt, when) in enumerate(turns):
        messages.append(_message(session, 2 * i, "user", prompt, when))
        messages.append(_message(session, 2 * i + 1, "assistant", f"re: {prompt}", when + 5))
    return {"info": {"id": session, "title": title, "version": "1.18.33",
                     "time": {"created": created, "updated": created}}, "messages": messages}


def _texts(messages: list[v.WithParts]) -> list[str]:
    return [p.text for m in messages for p in m.parts if isinstance(p, v.TextPart)]


def test_the_real_fork_is_a_fork_of_the_session_it_copied(tmp_path: Path) -> None:
    folder = tmp_path / "exports"
    shutil.copytree(REAL / "transcripts", folder)
    plan = plan_path(folder)
    kinds = {s.original_id: s for s in plan.sessions}
    main = kinds["ses_dddfecf6fffejQ3hAO6c3KQWQN"]
    fork = kinds["ses_dddfc0621fferNQYABXLDsEaNq"]
    assert (main.kind, fork.kind, fork.parent) == ("main", "fork", main.id)
    store = written(plan)
    in_main = _texts(at(store, main.id).messages())
    in_fork = _texts(at(store, fork.id).messages())
    assert in_fork[:len(in_main)] == in_main  # the shared prefix is the original's
    assert '"[[text]] A question in the fork."' in in_fork
    assert '"[[text]] A question in the fork."' not in in_main
    # The fork holds only what it added: no copied prompt is written twice.
    own = [e.text for e in fork.events if isinstance(e, ev.TextAdded)]
    assert not set(own) & set(in_main)


@settings(max_examples=25, deadline=None)
@given(turns=st.integers(1, 4), kept=st.integers(0, 4), added=st.integers(0, 2),
       diverge=st.booleans())
def test_a_copied_prefix_forks_where_the_copy_ends(tmp_path_factory: Any, turns: int,
                                                   kept: int, added: int,
                                                   diverge: bool) -> None:
    kept = min(kept, turns)
    folder = tmp_path_factory.mktemp("f")
    original = [(f"prompt {i}", 1_000 + 100 * i) for i in range(turns)]
    copy = original[:kept] + [(f"new {i}", 9_000 + 100 * i) for i in range(added)]
    if diverge and copy:  # one character changed: no longer a copy of that message
        copy[0] = (copy[0][0] + "!", copy[0][1])
    (folder / "a.json").write_text(json.dumps(_export("ses_a", 900, original)))
    (folder / "b.json").write_text(json.dumps(_export("ses_b", 8_000, copy,
                                                      "t (fork #1)")))
    plan = plan_path(folder)
    a, b = (next(s for s in plan.sessions if s.original_id == o) for o in ("ses_a", "ses_b"))
    shared = 0 if diverge else kept
    if shared == 0:
        assert (a.kind, b.kind) == ("main", "main")
    else:
        assert (b.kind, b.parent) == ("fork", a.id)
    store = written(plan)
    in_b = [t for t in _texts(at(store, b.id).messages())]
    want = [t for p, _ in copy for t in (p, f"re: {p}")]
    assert in_b == want
