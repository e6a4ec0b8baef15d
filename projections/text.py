"""Readable text for people: messages and their parts, one line per part."""

from __future__ import annotations

import hashlib
import json
from types import CodeType
from typing import TYPE_CHECKING, Any, Final

from engine.codec import to_builtins
from engine.events import Event, tag_of
from engine.mailbox_credentials import redacted
from projections import snapshot_codec
from projections import views as v

if TYPE_CHECKING:
    from projections.withparts import WithPartsProjection

_PREVIEW = 72


def _short(text: str, limit: int = _PREVIEW) -> str:
    if len(text) > 4 * limit:
        # A long text (a tool's whole output): collapsing a prefix gives a prefix of the
        # whole text's collapse, so when it is already too long it decides the preview
        # without splitting megabytes.
        head = " ".join(text[: 4 * limit].split())
        if len(head) > limit:
            return head[: limit - 1] + "…"
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def render_part(p: v.Part) -> str:
    if isinstance(p, v.TextPart):
        flags = "".join(f" [{f}]" for f, on in (("synthetic", p.synthetic),
                                               ("ignored", p.ignored)) if on)
        streaming = " (streaming)" if p.time is not None and p.time.end is None else ""
        return f"text{flags}{streaming}: {_short(p.text)}"
    if isinstance(p, v.ReasoningPart):
        streaming = " (streaming)" if p.time.end is None else ""
        return f"reasoning{streaming}: {_short(p.text)}"
    if isinstance(p, v.ToolPart):
        s = p.state
        head = f"tool {p.tool} [{p.call_id}] {s.TAG}"
        if p.approval is not None:
            head += f" (approval {p.approval.state})"
        if isinstance(s, v.ToolStateCompleted):
            cleared = " [output compacted]" if s.time.compacted is not None else ""
            return f"{head}{cleared}: {_short(s.output)}"
        if isinstance(s, v.ToolStateError):
            kind = (s.metadata or {}).get("kind", "error")
            return f"{head} ({kind}): {_short(s.error)}"
        if isinstance(s, v.ToolStatePending):
            return f"{head}: {_short(s.raw or json.dumps(s.input))}"
        return f"{head}{': ' + s.title if s.title else ''}"
    if isinstance(p, v.StepFinishPart):
        return (f"step-finish: {p.reason}, cost {p.cost:g}, tokens in {p.tokens.input} "
                f"out {p.tokens.output}")
    if isinstance(p, v.FilePart):
        return f"file {p.filename or ''} {p.mime} {p.url}".replace("  ", " ")
    return p.TAG


def render_message(m: v.WithParts) -> str:
    """One message: its head line, then a line per part."""
    info = m.info
    status = "completed" if info.time.completed is not None else "open"
    extra = ""
    if isinstance(info, v.AssistantInfo):
        if info.error is not None:
            extra = f" error={info.error.kind}"
        if info.finish:
            extra += f" finish={info.finish}"
    return "\n".join([f"{info.role} {info.id} ({status}{extra})",
                      *[f"  - {render_part(p)}" for p in m.parts]])


def render_messages(messages: list[v.WithParts]) -> str:
    return "\n".join(map(render_message, messages))


def render_state(projection: WithPartsProjection) -> str:
    """``render_messages(projection.messages())``, but a message restored from a stored
    snapshot and untouched since prints the preview stored beside its chunk (written by
    :func:`render_message`) without its views being decoded or built."""
    return "\n".join(x if isinstance(x, str) else render_message(x)
                     for x in projection.previewed(PREVIEW_FINGERPRINT))


def _code_digest(code: CodeType, into: Any) -> None:
    into.update(code.co_code)
    into.update(repr(code.co_names).encode())
    for const in code.co_consts:
        if isinstance(const, CodeType):
            _code_digest(const, into)
        elif isinstance(const, frozenset):  # (its order follows the string hash seed)
            into.update(repr(sorted(map(repr, const))).encode())
        else:
            into.update(repr(const).encode())


def _fingerprint() -> bytes:
    """What a stored preview was rendered by: the bytecode of the functions above
    (another interpreter's bytecode, or any change to them, makes every stored
    preview a miss) and the views they read (the chunk format's fingerprint)."""
    digest = hashlib.blake2b(snapshot_codec.FINGERPRINT, digest_size=8)
    for fn in (_short, render_part, render_message):
        _code_digest(fn.__code__, digest)
    return digest.digest()


PREVIEW_FINGERPRINT: Final = _fingerprint()


_ENVELOPE = frozenset({"type", "id", "session_id", "seq", "time", "actor", "v"})


def render_event(e: Event) -> str:
    """One line: seq, time, actor, type, then the payload fields that are not defaults."""
    fields = {k: x for k, x in to_builtins(redacted(e)).items() if k not in _ENVELOPE}
    body = " ".join(f"{k}={_short(json.dumps(x, ensure_ascii=False), 40)}"
                    for k, x in fields.items())
    return f"{e.seq:>6} {e.time} {e.actor:<9} {tag_of(type(e)):<24} {body}"
