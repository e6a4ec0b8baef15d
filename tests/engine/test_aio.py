"""The asyncio API: async ingest, live subscribers, bounded buffers and their overflow."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from engine.adapters.anthropic import AnthropicIngest
from engine.aio import AsyncSession, Gap, SubscriberOverflow, Update
from engine.store import MemoryStore
from projections import views as v
from projections.live import message_fold, withparts_fold
from projections.withparts import WithPartsProjection

JSON = dict[str, Any]


def fake_stream(n_text: int = 3) -> list[JSON]:
    return [
        {"type": "message_start", "message": {"id": "m", "model": "fake", "content": [],
                                              "usage": {"input_tokens": 5, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text",
                                                                        "text": ""}},
        *({"type": "content_block_delta", "index": 0,
           "delta": {"type": "text_delta", "text": f"t{i} "}} for i in range(n_text)),
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {
            "type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}},
        {"type": "content_block_delta", "index": 1,
         "delta": {"type": "input_json_delta", "partial_json": '{"path": "a.py"}'}},
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
         "usage": {"output_tokens": 7}},
        {"type": "message_stop"},
    ]


async def agen(events: list[JSON], *, fail_at: int | None = None) -> AsyncIterator[JSON]:
    for i, e in enumerate(events):
        if i == fail_at:
            raise ConnectionError("connection reset")
        await asyncio.sleep(0)
        yield e


def test_agent_loop_with_a_live_subscriber() -> None:
    async def main() -> list[str]:
        a = AsyncSession.create(MemoryStore())
        await a.user_message("read a.py")
        sub = a.subscribe(message_fold(a.id))
        seen: list[str] = []

        async def watch() -> None:
            async for u in sub:
                assert isinstance(u, Update)
                wp = u.state
                if wp is None:
                    continue
                for p in wp.parts:
                    if isinstance(p, v.ToolPart):
                        line = f"{p.tool} {p.state.TAG}"
                        if not seen or seen[-1] != line:
                            seen.append(line)

        watcher = asyncio.create_task(watch())
        ing = AnthropicIngest(a.session)
        result = await a.ingest(ing, agen(fake_stream()))
        [call] = result.tool_calls
        await a.start_tool(call.ref)
        await a.complete_tool(call.ref, "print('hi')")
        ing.complete()
        await a.aclose()
        await watcher
        return seen

    assert asyncio.run(main()) == ["read pending", "read running", "read completed"]


def test_a_broken_async_stream_settles_the_message() -> None:
    async def main() -> WithPartsProjection:
        a = AsyncSession.create(MemoryStore())
        sub = a.subscribe(withparts_fold(a.id), maxsize=10_000)
        ing = AnthropicIngest(a.session)
        with pytest.raises(ConnectionError):
            await a.ingest(ing, agen(fake_stream(), fail_at=6))
        await a.aclose()
        last: Any = None
        async for u in sub:
            assert isinstance(u, Update)
            last = u.state
        return last  # type: ignore[no-any-return]

    proj = asyncio.run(main())
    [wp] = proj.messages()
    assert isinstance(wp.info, v.AssistantInfo)
    assert wp.info.error is not None
    assert wp.info.error.kind == "aborted"
    assert [p.text for p in wp.parts if isinstance(p, v.TextPart)] == ["t0 t1 t2 "]


def test_a_slow_subscriber_gets_a_gap_and_never_blocks_the_writer() -> None:
    async def main() -> tuple[list[Any], int, int]:
        a = AsyncSession.create(MemoryStore())
        slow = a.subscribe(withparts_fold(a.id), maxsize=4)
        fast = a.subscribe(maxsize=10_000)
        ing = AnthropicIngest(a.session)
        # Nothing reads while the whole stream is written: the writer must not wait.
        await asyncio.wait_for(a.ingest(ing, fake_stream(50)), timeout=5)
        await a.aclose()
        got = [u async for u in slow]
        n_fast = len([u async for u in fast])
        return got, n_fast, a.version

    got, n_fast, version = asyncio.run(main())
    assert n_fast == version  # an unhurried subscriber saw every event
    gap, *rest = got
    assert isinstance(gap, Gap)
    assert len(rest) == 4  # the buffer's bound
    assert gap.first == 1
    assert gap.last == rest[0].event.seq - 1
    assert gap.count == version - 4
    # The fold saw every event: the state is complete despite the gap.
    last = rest[-1]
    assert isinstance(last, Update)
    proj = last.state
    [wp] = proj.messages()
    assert "".join(p.text for p in wp.parts if isinstance(p, v.TextPart)).count("t") == 50


def test_disconnect_policy_raises_after_the_buffered_updates() -> None:
    async def main() -> tuple[int, bool]:
        a = AsyncSession.create(MemoryStore())
        sub = a.subscribe(maxsize=3, overflow="disconnect")
        await a.ingest(AnthropicIngest(a.session), fake_stream(10))
        n = 0

        async def drain() -> None:
            nonlocal n
            async for _ in sub:
                n += 1

        with pytest.raises(SubscriberOverflow):
            await drain()
        return n, sub.closed

    n, closed = asyncio.run(main())
    assert n == 3
    assert closed


def test_replay_folds_the_history_once_and_delivers_only_new_events() -> None:
    async def main() -> tuple[int, int]:
        a = AsyncSession.create(MemoryStore())
        await a.user_message("one")
        before = a.version
        sub = a.subscribe(withparts_fold(a.id))
        await a.user_message("two")
        await a.aclose()
        updates = [u async for u in sub]
        last = updates[-1]
        assert isinstance(last, Update)
        return len(updates), len(last.state.messages()) + 0 * before

    n, messages = asyncio.run(main())
    assert n == 4  # started, text added, part ended, completed
    assert messages == 2
