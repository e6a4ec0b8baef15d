"""The sendable view: what convlog would send for a conversation, with every repair named.

Q CLI repairs its history in place before each send and says nothing. Here the
conversation state stays as the log made it; :func:`sendable` derives a view
that satisfies the invariants and lists each repair (rule, ids, detail). The
rules, in order:

1. ``trim-history``: only the valid history range is sent; with no valid start
   a next message made of tool results becomes the overflow prompt
   (``overflow-next-message``).
2. ``first-entry-results-to-text``: the first entry's user side carries no tool
   results; they become plain text.
3. tool ids match (Q CLI does not check; the backend then rejects the request as
   "Improperly formed"): every result answers a tool use of the assistant just
   before it (``orphan-results-to-text``; a message made only of orphans becomes
   a prompt, otherwise their text joins its additional context), no use is
   answered twice (``duplicate-results``), every use gets a result
   (``missing-results``: "Tool use was cancelled by the user", status error).
4. no empty content: ``Empty prompt`` for an empty prompt (``empty-prompt``),
   ``<tool result redacted>`` for an empty result (``empty-tool-result``).
5. ``tool-name``: a historic tool name missing from the current tool set is
   restored from ``orig_name``, else mapped to the unique tool ending with it,
   else renamed ``dummy`` (only when the conversation declared a tool set).
6. ``truncate-user-message``: a user message over 400,000 bytes is cut fairly.

A summary (and context files, when given) then comes first as one synthetic
user/assistant pair, exactly as Q CLI injects it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import attrs

from projections.qcli import messages as m
from projections.qcli.as_sent import (
    MAX_USER_MESSAGE_SIZE,
    SUMMARY_ACKNOWLEDGEMENT,
    UserInputMessage,
    block_text,
    content_size,
    context_files_block,
    into_history_entry,
    into_user_input_message,
    replace_content_with_tool_use_results,
    summary_context,
    truncate_user_message,
)
from projections.qcli.limits import MAX_CONVERSATION_STATE_HISTORY_LEN

OVERFLOW_PROMPT: Final = "The conversation history has overflowed, clearing state"


@attrs.frozen
class Repair:
    """One change the sendable view made: which rule, which ids, what happened."""

    rule: str
    ids: tuple[str, ...] = ()
    detail: str = ""


@attrs.frozen
class SendRequest:
    """Q CLI's request shape: the history flattened to user/assistant turns."""

    conversation_id: str
    user_input_message: UserInputMessage | None
    history: tuple[UserInputMessage | m.AssistantMessage, ...]


@attrs.frozen
class SendableConversation:
    conversation_id: str
    history: tuple[m.HistoryEntry, ...]  # the synthetic context pair first, if any
    next_message: m.UserMessage | None
    tools: dict[str, tuple[m.ToolSpec, ...]]
    model_id: str | None
    repairs: tuple[Repair, ...]
    context_entries: int = 0  # how many leading entries are synthetic

    def to_request(self) -> SendRequest:
        flat: list[UserInputMessage | m.AssistantMessage] = []
        for entry in self.history:
            flat += [into_history_entry(entry.user, self.model_id), entry.assistant]
        nm = self.next_message
        return SendRequest(
            self.conversation_id,
            None if nm is None else into_user_input_message(nm, self.model_id, self.tools),
            tuple(flat),
        )


def _result_ids(message: m.UserMessage) -> tuple[str, ...]:
    return tuple(r.tool_use_id for r in message.tool_use_results() or ())


def _with_results(message: m.UserMessage, results: tuple[m.ToolUseResult, ...]
                  ) -> m.UserMessage:
    return attrs.evolve(message, content=m.with_results(message.content, results))


class _Repairer:
    def __init__(self) -> None:
        self.repairs: list[Repair] = []

    def note(self, rule: str, ids: tuple[str, ...] = (), detail: str = "") -> None:
        self.repairs.append(Repair(rule, ids, detail))

    def match(self, uses: tuple[m.AssistantToolUse, ...], user: m.UserMessage, where: str
              ) -> m.UserMessage:
        """Make ``user``'s results answer exactly ``uses``."""
        results = user.tool_use_results()
        if not uses:
            if results is not None:
                self.note("orphan-results-to-text", _result_ids(user),
                          f"{where}: no tool use before these results")
                return replace_content_with_tool_use_results(user)
            return user
        if results is None:
            ids = tuple(u.id for u in uses)
            self.note("missing-results", ids, f"{where}: a prompt where results were due")
            return attrs.evolve(user, content=m.CancelledToolUses(
                user.prompt(), tuple(m.cancelled_result(i) for i in ids)))
        wanted = {u.id for u in uses}
        kept: dict[str, m.ToolUseResult] = {}
        orphans: list[m.ToolUseResult] = []
        duplicates: list[str] = []
        for r in results:
            if r.tool_use_id not in wanted:
                orphans.append(r)
            elif r.tool_use_id in kept:
                duplicates.append(r.tool_use_id)
            else:
                kept[r.tool_use_id] = r
        missing = tuple(u.id for u in uses if u.id not in kept)
        if not (orphans or duplicates or missing):
            return user
        extra = user.additional_context
        if orphans:
            self.note("orphan-results-to-text", tuple(r.tool_use_id for r in orphans),
                      f"{where}: results for tool uses that were never made")
            text = " ".join(block_text(b) for r in orphans for b in r.content)
            extra = f"{extra}\n{text}" if extra else text
        if duplicates:
            self.note("duplicate-results", tuple(duplicates),
                      f"{where}: only the first result of a tool use is kept")
        if missing:
            self.note("missing-results", missing, f"{where}: cancelled results added")
        fixed = tuple(kept.get(u.id) or m.cancelled_result(u.id) for u in uses)
        return attrs.evolve(_with_results(user, fixed), additional_context=extra)

    def not_empty(self, user: m.UserMessage, where: str) -> m.UserMessage:
        c = user.content
        if isinstance(c, m.Prompt) and c.prompt == "":
            self.note("empty-prompt", (), f"{where}: set to '{m.EMPTY_PROMPT}'")
            return attrs.evolve(user, content=m.Prompt(m.EMPTY_PROMPT))
        if isinstance(c, m.CancelledToolUses) and c.prompt == "":
            self.note("empty-prompt", (), f"{where}: the empty prompt is dropped")
            user = attrs.evolve(user, content=attrs.evolve(c, prompt=None))
        results = user.tool_use_results()
        if not results:
            return user
        empty = tuple(r.tool_use_id for r in results
                      if all(isinstance(b, m.TextBlock) and not b.text for b in r.content))
        if not empty:
            return user
        self.note("empty-tool-result", empty, f"{where}: set to '{m.REDACTED_TOOL_RESULT}'")
        return _with_results(user, tuple(
            attrs.evolve(r, content=(m.TextBlock(m.REDACTED_TOOL_RESULT),))
            if r.tool_use_id in empty else r for r in results))

    def small_enough(self, user: m.UserMessage, where: str, limit: int) -> m.UserMessage:
        size = content_size(user.content)
        if size <= limit:
            return user
        self.note("truncate-user-message", _result_ids(user),
                  f"{where}: {size} bytes cut to {limit}")
        return truncate_user_message(user, limit)

    def tool_names(self, entry: m.HistoryEntry, names: frozenset[str]) -> m.HistoryEntry:
        a = entry.assistant
        if not isinstance(a, m.ToolUse) or all(u.name in names for u in a.tool_uses):
            return entry
        uses = []
        for u in a.tool_uses:
            if u.name in names:
                uses.append(u)
                continue
            if u.orig_name in names:
                new = attrs.evolve(u, name=u.orig_name, args=u.orig_args)
            else:
                ending = [n for n in names if n.endswith(u.name)]
                new = attrs.evolve(u, name=ending[0] if len(ending) == 1 else m.DUMMY_TOOL_NAME)
            self.note("tool-name", (u.id,), f"{u.name} -> {new.name}")
            uses.append(new)
        return attrs.evolve(entry, assistant=attrs.evolve(a, tool_uses=tuple(uses)))


def sendable(state: m.ConversationState, *, context_files: Mapping[str, str] | None = None,
             max_user_message_size: int = MAX_USER_MESSAGE_SIZE,
             history_cap: int = MAX_CONVERSATION_STATE_HISTORY_LEN) -> SendableConversation:
    """The conversation as it would be sent, repaired, with the list of repairs."""
    fix = _Repairer()
    start, end = state.valid_history_range
    history = list(state.history[start:end])
    nm = state.next_message
    if start > 0:
        fix.note("trim-history", (), f"the {start} oldest entries are not sent")
    if (start, end) == (0, 0) and state.history:
        fix.note("trim-history", (), "no entry starts with a prompt: no history is sent")
        if nm is not None and nm.has_tool_use_results():
            fix.note("overflow-next-message", _result_ids(nm), OVERFLOW_PROMPT)
            nm = attrs.evolve(nm, content=m.Prompt(OVERFLOW_PROMPT), additional_context="")
    if len(history) > history_cap:  # only reachable with a lowered cap
        fix.note("trim-history", (), f"capped at {history_cap} entries")
        history = history[-history_cap:]
    if history and history[0].user.has_tool_use_results():
        fix.note("first-entry-results-to-text", _result_ids(history[0].user),
                 "the first entry may not answer tool uses")
        history[0] = attrs.evolve(history[0],
                                  user=replace_content_with_tool_use_results(history[0].user))
    for i in range(1, len(history)):
        uses = m.tool_uses_of(history[i - 1].assistant)
        history[i] = attrs.evolve(history[i], user=fix.match(uses, history[i].user,
                                                             f"entry {start + i}"))
    if nm is not None:
        uses = m.tool_uses_of(history[-1].assistant) if history else ()
        nm = fix.match(uses, nm, "next message")
    names = frozenset(t.name for group in state.tools.values() for t in group
                      if t.name != m.DUMMY_TOOL_NAME)
    for i, entry in enumerate(history):
        where = f"entry {start + i}"
        user = fix.small_enough(fix.not_empty(entry.user, where), where, max_user_message_size)
        fixed = attrs.evolve(entry, user=user)
        history[i] = fix.tool_names(fixed, names) if names else fixed
    if nm is not None:
        nm = fix.small_enough(fix.not_empty(nm, "next message"), "next message",
                              max_user_message_size)
    context: list[m.HistoryEntry] = []
    if state.latest_summary is not None or context_files:
        text = (summary_context(state.latest_summary[0], context_files)[0]
                if state.latest_summary is not None else context_files_block(context_files))
        context.append(m.HistoryEntry(
            m.UserMessage("", m.UserEnvContext(None), m.Prompt(text)),
            m.Response(None, SUMMARY_ACKNOWLEDGEMENT),
        ))
    return SendableConversation(
        state.conversation_id, (*context, *history), nm, dict(state.tools),
        state.model_info.model_id if state.model_info is not None else None,
        tuple(fix.repairs), len(context),
    )


def invariant_violations(view: SendableConversation,
                         max_user_message_size: int = MAX_USER_MESSAGE_SIZE) -> list[str]:
    """Why ``view`` could not be sent as is (empty when it satisfies every invariant)."""
    out: list[str] = []
    history = view.history
    if history and history[0].user.has_tool_use_results():
        out.append("the first entry carries tool results")
    names = {t.name for group in view.tools.values() for t in group} | {m.DUMMY_TOOL_NAME}
    users = [(f"entry {i}", e.user) for i, e in enumerate(history)]
    if view.next_message is not None:
        users.append(("next message", view.next_message))
    for i, (where, user) in enumerate(users):
        before = history[i - 1].assistant if 0 < i <= len(history) else None
        uses = sorted(u.id for u in m.tool_uses_of(before)) if before is not None else []
        got = sorted(_result_ids(user))
        if (user.has_tool_use_results() or uses) and got != uses:
            out.append(f"{where}: results {got} do not answer tool uses {uses}")
        if user.prompt() == "":
            out.append(f"{where}: empty prompt")
        for r in user.tool_use_results() or ():
            if all(isinstance(b, m.TextBlock) and not b.text for b in r.content):
                out.append(f"{where}: empty result {r.tool_use_id}")
        if content_size(user.content) > max_user_message_size:
            out.append(f"{where}: over {max_user_message_size} bytes")
    if len(names) > 1:
        for e in history:
            for u in m.tool_uses_of(e.assistant):
                if u.name not in names:
                    out.append(f"tool use {u.id} names unknown tool {u.name}")
    return out
