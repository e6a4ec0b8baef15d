"""A parent against its fork (or two forks of one lineage), compared by position.

Past the fork point the two sides' messages have their own ids, so a diff by id
(``timetravel.diff_states``) can only say "all of these were removed, all of those
added". Here the messages both sides hold (the shared prefix, by id) are diffed as
usual, and the rest are paired by their position after it: the first answer after
the fork in one against the first in the other, part by part, with what differs
(text from its first differing character, a tool's name, input, state and output).
Pure: messages in, rows out.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from projections import views as v
from projections.timetravel import diff_states

EXCERPT = 60  # characters shown around a difference


def by_position(before: list[v.WithParts], after: list[v.WithParts], *, seq_a: int,
                seq_b: int) -> dict[str, Any]:
    """Rows for the page's diff list (the fields of ``timetravel.Change`` plus
    ``a_message_id``, ``position`` and ``full``: the whole detail, shown on hover),
    with ``shared``: how many messages the two sides hold in common."""
    if before and after:  # each side names its own session; that is no difference
        after = [_in_session(m, before[0].info.session_id) for m in after]
    ids_b = {m.info.id for m in after}
    shared = [m for m in before if m.info.id in ids_b]
    ids_shared = {m.info.id for m in shared}
    both = [m for m in after if m.info.id in ids_shared]
    rows = detailed(diff_states(shared, both, seq_a=seq_a, seq_b=seq_b).as_json()["changes"],
                    shared, both)
    rest_a = [m for m in before if m.info.id not in ids_shared]
    rest_b = [m for m in after if m.info.id not in ids_shared]
    for i in range(max(len(rest_a), len(rest_b))):
        ma = rest_a[i] if i < len(rest_a) else None
        mb = rest_b[i] if i < len(rest_b) else None
        rows.extend(_message_rows(i + 1, ma, mb))
    return {"shared": len(shared), "changes": rows}


def _in_session(m: v.WithParts, sid: str) -> v.WithParts:
    if m.info.session_id == sid:
        return m
    return v.WithParts(attrs.evolve(m.info, session_id=sid),
                       [attrs.evolve(p, session_id=sid) for p in m.parts])


def detailed(changes: list[dict[str, Any]], before: list[v.WithParts],
             after: list[v.WithParts]) -> list[dict[str, Any]]:
    """``diff_states`` rows (by id) with what changed where they do not say: a
    message's fields (finish, tokens, cost, times…), a part's text from its first
    differing character, a tool's input or output, an added or removed part's gist.
    Each row gets ``full`` (the whole detail, shown on hover) and ``position`` None."""
    msgs_a = {m.info.id: m for m in before}
    msgs_b = {m.info.id: m for m in after}
    out = []
    for c in changes:
        row = dict(c, position=None, a_message_id=None, full=None)
        if not row["detail"] or row["kind"] in {"part-changed", "message-changed"}:
            extra = _detail_of(row, msgs_a.get(row["message_id"]), msgs_b.get(row["message_id"]))
            if extra:
                whole = f"{row['detail']}: {extra}" if row["detail"] else extra
                row["detail"], row["full"] = _short(whole), whole
        out.append(row)
    return out


def _detail_of(row: dict[str, Any], ma: v.WithParts | None, mb: v.WithParts | None) -> str:
    pid = row.get("part_id")
    if pid is None:
        if ma is None or mb is None:
            return _gist(ma or mb) if (ma or mb) else ""  # type: ignore[arg-type]
        return _info_difference(ma, mb)
    pa = next((p for p in ma.parts if p.id == pid), None) if ma else None
    pb = next((p for p in mb.parts if p.id == pid), None) if mb else None
    if pa is not None and pb is not None:
        return _part_difference(pa, pb) or ""
    return _part_gist(pa or pb)


def _info_difference(ma: v.WithParts, mb: v.WithParts) -> str:
    from projections.json import converter  # noqa: PLC0415

    a, b = _flat(converter.unstructure(ma.info)), _flat(converter.unstructure(mb.info))
    keys = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    return ", ".join(f"{k} {_value(a.get(k))} → {_value(b.get(k))}" for k in keys)


def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(data, dict):
        return {prefix: data}
    out: dict[str, Any] = {}
    for k, x in data.items():
        out.update(_flat(x, f"{prefix}.{k}" if prefix else str(k)))
    return out


def _value(x: Any) -> str:
    text = "—" if x is None else x if isinstance(x, str) else json.dumps(x, default=str)
    return text if len(text) <= 40 else text[:39] + "…"


def _row(kind: str, position: int, ma: v.WithParts | None, mb: v.WithParts | None, *,
         part: str | None = None, before: str = "", after: str = "",
         detail: str = "") -> dict[str, Any]:
    return {"kind": kind, "position": position,
            "message_id": (mb or ma).info.id if (mb or ma) else "",  # type: ignore[union-attr]
            "a_message_id": ma.info.id if ma else None, "part_id": part,
            "before": before, "after": after, "detail": _short(detail), "full": detail}


def _message_rows(pos: int, ma: v.WithParts | None, mb: v.WithParts | None
                  ) -> list[dict[str, Any]]:
    if mb is None:
        assert ma is not None
        return [_row("only-a", pos, ma, None, before=ma.info.role, detail=_gist(ma))]
    if ma is None:
        return [_row("only-b", pos, None, mb, after=mb.info.role, detail=_gist(mb))]
    parts = [_part_row(pos, ma, mb, j, pair) for j, pair in enumerate(_zip(ma, mb))]
    differing = [r for r in parts if r is not None]
    same = not differing and ma.info.role == mb.info.role
    head = _row("same" if same else "differs", pos, ma, mb, before=ma.info.role,
                after=mb.info.role,
                detail=(f"{len(ma.parts)} part(s) alike" if same else
                        f"{len(differing)} of {max(len(ma.parts), len(mb.parts))} part(s) "
                        "differ"))
    return [head, *differing]


def _zip(ma: v.WithParts, mb: v.WithParts) -> list[tuple[v.Part | None, v.Part | None]]:
    n = max(len(ma.parts), len(mb.parts))
    return [(ma.parts[j] if j < len(ma.parts) else None,
             mb.parts[j] if j < len(mb.parts) else None) for j in range(n)]


def _part_row(pos: int, ma: v.WithParts, mb: v.WithParts, j: int,
              pair: tuple[v.Part | None, v.Part | None]) -> dict[str, Any] | None:
    pa, pb = pair
    label_a, label_b = _label(pa), _label(pb)
    part = (pb or pa).id  # type: ignore[union-attr]
    if pa is None or pb is None:
        return _row("part-only-" + ("b" if pa is None else "a"), pos, ma, mb, part=part,
                    before=label_a, after=label_b,
                    detail=f"part {j + 1}: " + _part_gist(pb if pa is None else pa))
    detail = _part_difference(pa, pb)
    if detail is None:
        return None
    return _row("part-differs", pos, ma, mb, part=part, before=label_a, after=label_b,
                detail=f"part {j + 1}: {detail}")


def _label(p: v.Part | None) -> str:
    if p is None:
        return "—"
    if isinstance(p, v.ToolPart):
        return f"tool {p.tool} {p.state.TAG}"
    return p.TAG


def _part_difference(pa: v.Part, pb: v.Part) -> str | None:
    if type(pa) is not type(pb):
        return f"{_label(pa)} vs {_label(pb)}"
    if isinstance(pa, v.TextPart | v.ReasoningPart):
        assert isinstance(pb, v.TextPart | v.ReasoningPart)
        return None if pa.text == pb.text else _text_difference(pa.text, pb.text)
    if isinstance(pa, v.ToolPart):
        assert isinstance(pb, v.ToolPart)
        bits = []
        if pa.tool != pb.tool:
            bits.append(f"tool {pa.tool} vs {pb.tool}")
        ia, ib = _json(getattr(pa.state, "input", None)), _json(getattr(pb.state, "input", None))
        if ia != ib:
            bits.append(f"input {_text_difference(ia, ib)}")
        if pa.state.TAG != pb.state.TAG:
            bits.append(f"state {pa.state.TAG} vs {pb.state.TAG}")
        oa, ob = _outcome(pa), _outcome(pb)
        if oa != ob:
            bits.append(f"output {_text_difference(oa, ob)}")
        return "; ".join(bits) or None
    return None if _json(_plain(pa)) == _json(_plain(pb)) else f"{_label(pa)} differs"


def _plain(p: v.Part) -> Any:
    from projections.json import converter  # noqa: PLC0415 - the one JSON shape of a part

    data = converter.unstructure(p)
    if isinstance(data, dict):  # ids differ on both sides by construction
        data = {k: x for k, x in data.items() if k not in {"id", "messageID"}}
    return data


def _outcome(p: v.ToolPart) -> str:
    st = p.state
    if isinstance(st, v.ToolStateCompleted):
        return st.output
    if isinstance(st, v.ToolStateError):
        return st.error
    return ""


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True,
                                                          ensure_ascii=False, default=str)


def _text_difference(a: str, b: str) -> str:
    """Where two texts part: the character, and each side from a little before it."""
    at = _common_prefix(a, b)
    start = max(0, at - 15)
    return (f"from char {at}: {json.dumps(a[start:start + EXCERPT], ensure_ascii=False)} vs "
            f"{json.dumps(b[start:start + EXCERPT], ensure_ascii=False)}")


def _common_prefix(a: str, b: str) -> int:
    """The length of the common prefix, by halving (slices compare in C: a long tool
    output costs a few comparisons, not a Python step per character)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _gist(m: v.WithParts) -> str:
    return "; ".join(_part_gist(p) for p in m.parts[:4]) + (
        f"; +{len(m.parts) - 4} part(s)" if len(m.parts) > 4 else "")


def _part_gist(p: v.Part | None) -> str:
    if isinstance(p, v.TextPart | v.ReasoningPart):
        return f"{p.TAG} {json.dumps(p.text[:EXCERPT], ensure_ascii=False)}"
    if isinstance(p, v.ToolPart):
        return f"tool {p.tool} {p.state.TAG} {_json(getattr(p.state, 'input', ''))[:EXCERPT]}"
    return _label(p)


def _short(text: str, limit: int = 400) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
