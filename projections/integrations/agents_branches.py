"""Branches of an Agents SDK conversation on convlog forks (``AdvancedSQLiteSession`` parity).

The SDK's ``AdvancedSQLiteSession`` lets a user go back to a turn and ask it
again on a new branch: ``create_branch_from_turn(n)`` copies the rows before
user turn ``n`` into the branch and switches to it. Here a branch is a convlog
fork of the current branch, taken just before that turn's user message: it
shares the prefix (nothing is copied), and its memory is the memory as it was
at that moment (pops made later on the source do not reach back into it).

A branch is named in its own log (a ``checkpoint.created`` tagged
``agents-branch:<name>``, its first event), so any object or process lists the
same branches; its convlog session id is derived from the Agents session id and
the name. ``"main"`` is the session itself. Switching is per object, as in the
SDK. Nothing is deleted: there is no ``delete_branch`` (a branch is a log).
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Any, Final

from engine import events as ev
from engine.errors import UnknownSession
from engine.ids import uuid7
from engine.integrations.openai_agents import usage_event
from engine.session import Session
from engine.store import Store
from projections.integrations.agents_usage import UsageFold, tool_rows, total, turn_rows
from projections.integrations.openai_agents import NAMESPACE, ConvlogSession, ItemsFold

MAIN: Final = "main"
BRANCH_TAG: Final = "agents-branch:"


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat()


def _preview(content: Any, size: int) -> str:
    text = content if isinstance(content, str) else str(content)
    return text if len(text) <= size else text[:size] + "..."


class BranchingConvlogSession(ConvlogSession):
    """A ``ConvlogSession`` with the branch operations of ``AdvancedSQLiteSession``."""

    def __init__(self, store: Store, session_id: str, **options: Any) -> None:
        super().__init__(store, session_id, **options)
        self.main_id = self.session.id
        self.branch = MAIN

    def _attach(self, session: Session) -> None:
        self.usage = UsageFold(_own_from(self.store, session.id))
        super()._attach(session)

    def _seen(self, e: ev.Event) -> None:
        super()._seen(e)
        self.usage(e)

    def branch_session_id(self, name: str) -> str:
        if name == MAIN:
            return self.main_id
        return str(uuid.uuid5(NAMESPACE, f"{self.session_id}\nbranch\n{name}"))

    # ------------------------------------------------------------------ turns

    def _turns(self, fold: ItemsFold) -> list[dict[str, Any]]:
        turns: list[dict[str, Any]] = []
        for item, ms in zip(fold.items, fold.times, strict=True):
            if isinstance(item, dict) and item.get("role") == "user":
                content = item.get("content", "")
                turns.append({"turn": len(turns) + 1, "content": _preview(content, 100),
                              "full_content": content, "timestamp": _iso(ms),
                              "can_branch": True})
        return turns

    def _fold_of(self, branch_id: str | None) -> ItemsFold:
        return self._folds_of(branch_id)[0]

    def _folds_of(self, branch_id: str | None) -> tuple[ItemsFold, UsageFold]:
        if branch_id is None or branch_id == self.branch:
            return self._run(lambda: (self.fold, self.usage))
        sid = self.branch_session_id(branch_id)
        fold = ItemsFold()
        try:
            usage = UsageFold(_own_from(self.store, sid))
            for e in self.store.read(sid):
                fold(e)
                usage(e)
        except UnknownSession:
            raise ValueError(f"no branch {branch_id!r}") from None
        return fold, usage

    async def get_conversation_turns(self, branch_id: str | None = None
                                     ) -> list[dict[str, Any]]:
        return await asyncio.to_thread(lambda: self._turns(self._fold_of(branch_id)))

    async def find_turns_by_content(self, search_term: str, branch_id: str | None = None
                                    ) -> list[dict[str, Any]]:
        turns = await self.get_conversation_turns(branch_id)
        return [t for t in turns if search_term in str(t["full_content"])]

    # ------------------------------------------------------------------ branches

    async def create_branch_from_turn(self, turn_number: int,
                                      branch_name: str | None = None) -> str:
        """A fork of the current branch just before user turn ``turn_number``; switched to."""
        if branch_name is not None and not branch_name.strip():
            raise ValueError("Branch name cannot be empty")
        name = branch_name or f"branch_from_turn_{turn_number}_{uuid7()[-12:]}"
        return await asyncio.to_thread(self._create, turn_number, name)

    def _create(self, turn_number: int, name: str) -> str:
        def fork() -> Session:
            fold = self.fold
            users = [i for i, item in enumerate(fold.items)
                     if isinstance(item, dict) and item.get("role") == "user"]
            if not 1 <= turn_number <= len(users):
                raise ValueError(f"Turn {turn_number} does not contain a user message "
                                 f"in branch {self.branch!r}")
            sid = self.branch_session_id(name)
            if name == MAIN or any(s.id == sid for s in self.store.sessions()):
                raise ValueError(f"Branch {name!r} already exists in this session")
            branch = self.session.fork(fold.before[users[turn_number - 1]], session_id=sid)
            named: list[ev.Event] = []
            if branch.lifecycle.conversation.state == "absent":
                named.append(ev.ConversationCreated(conversation_id=uuid7()))
            named.append(ev.CheckpointCreated(
                tag=BRANCH_TAG + name, is_turn=False,
                description=f"turn {turn_number} of branch {self.branch}"))
            branch.record(named)
            return branch

        with self._lock:
            branch = self._run(fork)
            self._attach(branch)
            self.branch = name
        return name

    async def create_branch_from_content(self, search_term: str,
                                         branch_name: str | None = None) -> str:
        matching = await self.find_turns_by_content(search_term)
        if not matching:
            raise ValueError(f"No user turns found containing '{search_term}'")
        return await self.create_branch_from_turn(matching[0]["turn"], branch_name)

    async def switch_to_branch(self, branch_id: str) -> None:
        def switch() -> None:
            sid = self.branch_session_id(branch_id)
            try:
                session = Session.open(self.store, sid)
            except UnknownSession:
                raise ValueError(f"Branch '{branch_id}' does not exist") from None
            with self._lock:
                self._attach(session)
                self.branch = branch_id

        await asyncio.to_thread(switch)

    async def list_branches(self) -> list[dict[str, Any]]:
        """Every branch of this session (forks of forks included), oldest first."""
        return await asyncio.to_thread(self._branches)

    def _branches(self) -> list[dict[str, Any]]:
        infos = {s.id: s for s in self.store.sessions()}
        out: list[dict[str, Any]] = []
        for sid, info in infos.items():
            name = MAIN if sid == self.main_id else self._name_of(info, infos)
            if name is None:
                continue
            fold = self._fold_of(name) if name != self.branch else self.fold
            out.append({"branch_id": name, "message_count": len(fold.items),
                        "user_turns": len(self._turns(fold)),
                        "is_current": name == self.branch, "created_at": _iso(info.created)})
        return sorted(out, key=lambda b: (b["branch_id"] != MAIN, b["created_at"]))

    def _name_of(self, info: Any, infos: dict[str, Any]) -> str | None:
        """The branch name of a fork descending from main, read from its own log."""
        parent = info.parent
        while parent is not None and parent != self.main_id:
            parent = infos[parent].parent if parent in infos else None
        if parent is None:
            return None
        for e in self.store.read(info.id, (info.fork_seq or 0) + 1):
            if isinstance(e, ev.CheckpointCreated) and e.tag.startswith(BRANCH_TAG):
                name = e.tag[len(BRANCH_TAG):]
                return name if self.branch_session_id(name) == info.id else None
        return None

    # ------------------------------------------------------------------ usage

    async def store_run_usage(self, result: Any) -> None:
        """Record a run's usage (``result.context_wrapper.usage``) for the current turn
        of this branch; nothing without a usage or a turn, as in the SDK."""
        usage = getattr(getattr(result, "context_wrapper", None), "usage", None)
        if usage is None:
            return

        def record() -> None:
            users = [by for item, by in zip(self.fold.items, self.fold.recorded_by,
                                            strict=True)
                     if isinstance(item, dict) and item.get("role") == "user"]
            if not users:
                return
            events: list[ev.Event] = []
            if self.session.lifecycle.conversation.state == "absent":
                events.append(ev.ConversationCreated(conversation_id=uuid7()))
            events.append(usage_event(users[-1], usage))
            self.session.record(events)

        await asyncio.to_thread(self._run, record)

    async def get_turn_usage(self, user_turn_number: int | None = None,
                             branch_id: str | None = None
                             ) -> list[dict[str, Any]] | dict[str, Any]:
        """Each held turn's usage on a branch (the current one by default), or one
        turn's (``{}`` when it has none)."""
        def rows() -> list[dict[str, Any]] | dict[str, Any]:
            found = turn_rows(*self._folds_of(branch_id))
            if user_turn_number is None:
                return found
            row = next((r for r in found if r["user_turn_number"] == user_turn_number), None)
            if row is None:
                return {}
            return {k: v for k, v in row.items() if k != "user_turn_number"}

        return await asyncio.to_thread(rows)

    async def get_session_usage(self, branch_id: str | None = None
                                ) -> dict[str, int] | None:
        """Usage summed over a branch's turns, or over every branch; None without any."""
        def summed() -> dict[str, int] | None:
            if branch_id:
                return total(turn_rows(*self._folds_of(branch_id)))
            names = [b["branch_id"] for b in self._branches()]
            return total([r for name in names for r in turn_rows(*self._folds_of(name))])

        return await asyncio.to_thread(summed)

    async def get_tool_usage(self, branch_id: str | None = None
                             ) -> list[tuple[str | None, int, int]]:
        """(tool name, calls, user turn) for the calls a branch's memory holds."""
        return await asyncio.to_thread(lambda: tool_rows(self._fold_of(branch_id)))


def _own_from(store: Store, session_id: str) -> int:
    """The first seq a session wrote itself (a fork's events before it are its parent's)."""
    return (store.session_info(session_id).fork_seq or 0) + 1
