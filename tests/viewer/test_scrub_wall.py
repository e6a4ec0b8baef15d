"""Where a scrub's wall time goes, and what cuts it: a cheap state answer is made on the
thread that read the request (no hand-over to a worker), every state answer says how
long it waited and worked (``Server-Timing``), and a fast scrub asks only for the latest
seq and paints only its answer, whatever order the answers come back in.

benchmarks/viewer.py reads the split at 1M events; these tests hold the behaviour."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from playwright.sync_api import Browser
from starlette.testclient import TestClient

from engine.session import Session
from engine.store import MemoryStore
from projections.demo import stepping_clock
from projections.serve import state as state_module
from projections.serve.app import create_app
from projections.serve.state import Viewer
from tests.support.browser import LOOPBACK
from tests.viewer.test_browser import expected, opened, visible, wait_seq

TIMING = re.compile(r"queue;dur=([\d.]+);desc=(inline|thread), compute;dur=([\d.]+), "
                    r"cpu;dur=([\d.]+), encode;dur=([\d.]+)")


def conversation(turns: int = 12) -> tuple[MemoryStore, str]:
    store = MemoryStore()
    s = Session.create(store, clock=stepping_clock())
    for i in range(turns):
        s.user_message(f"question {i}")
        m = s.start_message("assistant")
        p = s.add_text(m)
        for k in range(4):
            s.text_delta(p, f"answer {i} piece {k}. ")
        s.end_part(p)
        s.complete_message(m, finish="stop")
    return store, s.id


def timing(header: str) -> tuple[str, float, float, float, float]:
    found = TIMING.fullmatch(header)
    assert found is not None, header
    queue, path, compute, cpu, encode = found.groups()
    return path, float(queue), float(compute), float(cpu), float(encode)


def test_a_state_answer_says_where_its_time_went_and_cheap_ones_are_made_inline() -> None:
    store, sid = conversation()
    c = TestClient(create_app(store), base_url=LOOPBACK)
    paths = []
    for seq in (5, 30, 31, 60, 2, 5):
        r = c.get(f"/api/sessions/{sid}/state", params={"seq": seq, "count": 8})
        assert r.status_code == 200, r.text
        path, queue, compute, cpu, encode = timing(r.headers["server-timing"])
        assert min(queue, compute, cpu, encode) >= 0
        paths.append(path)
        # Made inline or in a thread, the answer is the viewer's.
        assert r.json() == Viewer(store).state(sid, seq, count=8)
    # The first answer for a session builds its Timeline (its cost is not known yet):
    # in a worker thread. Once the answers are known to be cheap, no hand-over.
    assert paths[0] == "thread"
    assert paths[-1] == "inline"


def test_an_answer_is_not_made_inline_when_it_would_be_costly(
        monkeypatch: pytest.MonkeyPatch) -> None:
    store, sid = conversation()
    viewer = Viewer(store)
    assert not viewer.cheap(sid)  # nothing known of the session yet
    viewer.state(sid, 5)
    viewer.state(sid, 6)
    assert viewer.cheap(sid)
    # The last answers were costly: the next goes to a worker thread.
    monkeypatch.setattr(state_module, "INLINE_CPU", -1.0)
    assert not viewer.cheap(sid)
    monkeypatch.undo()
    # A rebuild of the Timeline is due (enough new events): not inline either.
    monkeypatch.setattr(state_module, "REBUILD_AFTER", 0)
    s = Session.open(store, sid)
    s.user_message("one more")
    assert not viewer.cheap(sid)


def with_a_long_output() -> tuple[MemoryStore, str]:
    """The conversation, then a tool whose output is clipped in answers (300 lines)."""
    store, sid = conversation()
    s = Session.open(store, sid)
    m = s.start_message("assistant")
    tool = s.add_tool(m, "call_long", "bash")
    s.tool_input_ready(tool, {"command": "seq 300"})
    s.start_tool(tool)
    s.complete_tool(tool, "\n".join(str(i) for i in range(300)))
    s.user_message("thanks")
    return store, sid


DEMO = with_a_long_output()


def filled(delta: dict[str, Any], held: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The delta answer's messages with each ``{"same": id}`` put back from ``held``."""
    return [held[m["same"]] if "same" in m else m for m in delta["messages"]]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_delta_answer_filled_from_what_the_page_holds_equals_the_full_answer(
        data: st.DataObject) -> None:
    """The page says which messages it holds (the seq they are of and their indexes);
    the answer sends each that is the same as ``{"same": id}``. Filled back in from what
    was held, it equals the full answer, at any pair of seqs and any held range."""
    store, sid = DEMO
    last = store.version(sid)
    have = data.draw(st.integers(0, last), label="have")
    seq = data.draw(st.integers(0, last), label="seq")
    viewer = Viewer(store)
    total = viewer.state(sid, have, count=1)["total"]
    first = data.draw(st.integers(0, max(0, total - 1)), label="first")
    count = data.draw(st.integers(1, 24), label="count")
    holding = viewer.state(sid, have, start=first, count=count, marks=False)
    held = {m["info"]["id"]: m for m in holding["messages"]}
    start = data.draw(st.none() | st.integers(0, max(0, total - 1)), label="start")
    delta = viewer.state(sid, seq, start=start, count=8, marks=False, have=have,
                         held=(holding["start"], holding["start"] + len(holding["messages"])))
    full = Viewer(store).state(sid, seq, start=start, count=8, marks=False)
    assert filled(delta, held) == full["messages"]
    assert {k: x for k, x in delta.items() if k not in {"messages", "have"}} == \
        {k: x for k, x in full.items() if k not in {"messages", "have"}}
    same = sum("same" in m for m in delta["messages"])
    assert delta["have"] == (have if same else None)
    # A clipped message is always sent: its line box reads the rest at the new seq.
    assert not any("same" in d and any("clipped" in p for p in f["parts"])
                   for d, f in zip(delta["messages"], full["messages"], strict=True))


def test_a_step_sends_only_the_message_it_changed() -> None:
    store, sid = DEMO
    viewer = Viewer(store)
    # The step to the last answer's last text delta: one message changes.
    seq = [e.seq for e in store.read(sid) if type(e).__name__ == "TextDelta"][-1] - 1
    before = viewer.state(sid, seq, count=8)
    after = viewer.state(sid, seq + 1, count=8, have=seq,
                         held=(before["start"], before["start"] + len(before["messages"])))
    assert sum("same" not in m for m in after["messages"]) == 1
    # The long output is the same one step later, but clipped: sent whole.
    end = store.version(sid)
    long_at = viewer.state(sid, end - 1, count=8)
    step = viewer.state(sid, end, count=8, have=end - 1,
                        held=(long_at["start"], long_at["start"] + len(long_at["messages"])))
    clipped = [m for m in step["messages"] if any("clipped" in p for p in m.get("parts", []))]
    assert len(clipped) == 1
    assert sum("same" in m for m in step["messages"]) == len(step["messages"]) - 2
    # Not kept (never answered): the whole answer, no delta.
    fresh = Viewer(store).state(sid, seq + 1, count=8, have=seq, held=(0, 8))
    assert fresh["have"] is None
    assert all("same" not in m for m in fresh["messages"])
    # Through the HTTP API: held is checked.
    c = TestClient(create_app(store), base_url=LOOPBACK)
    r = c.get(f"/api/sessions/{sid}/state", params={"seq": 3, "have": 2, "held": "x"})
    assert r.status_code == 400


# In the page: each state request's answer is held back a random while (0-80 ms, not
# heeding the abort), so answers come back in any order; every paint is recorded.
SHUFFLED = """() => {
    const real = window.fetch;
    window.__painted = [];
    window.fetch = async (url, opts) => {
        const r = await real(url, opts);
        if (String(url).includes('/state?') && !String(url).includes('start=')) {
            await new Promise((ok) => setTimeout(ok, Math.random() * 80));
        }
        return r;
    };
    new MutationObserver(() => window.__painted.push(
        [Number(document.body.dataset.shownSeq), window.__asked]))
        .observe(document.body, {attributes: true, attributeFilter: ['data-shown-seq']});
}"""

# Scrubs over ``seqs`` one input event per task, a few ms apart (a fast drag).
SCRUB = """async (seqs) => {
    const s = document.getElementById('slider');
    for (const seq of seqs) {
        window.__asked = seq;
        s.value = String(seq);
        s.dispatchEvent(new Event('input'));
        await new Promise((ok) => setTimeout(ok, Math.random() * 12));
    }
}"""


def test_a_fast_scrub_ends_on_its_last_seq_and_never_paints_an_older_one_after(
        browser: Browser) -> None:
    store, sid = conversation(6)
    last = store.version(sid)
    with opened(browser, store, f"/?session={sid}&seq=1") as page:
        page.set_viewport_size({"width": 1280, "height": 2400})  # every message on screen
        wait_seq(page, 1)
        page.evaluate(SHUFFLED)
        for round_ in range(3):
            seqs = random.Random(round_).sample(range(1, last + 1), 40)
            page.evaluate(SCRUB, seqs)
            wait_seq(page, seqs[-1])
            page.wait_for_timeout(250)  # every answer held back is in by now
            assert page.get_attribute("body", "data-shown-seq") == str(seqs[-1])
            page.wait_for_function("() => !document.querySelector('#conv .msg.placeholder')")
            assert visible(page) == expected(store, sid, seqs[-1])
            painted: list[list[int]] = page.evaluate("() => window.__painted.splice(0)")
            # Only the answer to the seq that was the latest asked for when it landed is
            # painted (an older one would be painted over at once, and would delay the
            # latest's paint): the paints follow the order of asking and end on the last.
            assert all(shown == asked for shown, asked in painted), painted
            order = [seqs.index(shown) for shown, _ in painted]
            assert order == sorted(order), (seqs, painted)
            assert painted[-1][0] == seqs[-1]


def test_a_step_in_the_page_gets_a_delta_and_shows_the_state_at_its_seq(
        browser: Browser) -> None:
    store, sid = conversation(6)
    seq = [e.seq for e in store.read(sid) if type(e).__name__ == "TextDelta"][-1] - 1
    answers: list[dict[str, Any]] = []
    with opened(browser, store, f"/?session={sid}&seq={seq}") as page:
        page.set_viewport_size({"width": 1280, "height": 2400})  # every message on screen
        wait_seq(page, seq)
        page.wait_for_function("() => !document.querySelector('#conv .msg.placeholder')")
        page.on("response", lambda r: answers.append(r.json()) if "have=" in r.url else None)
        page.keyboard.press("ArrowRight")
        wait_seq(page, seq + 1)
        page.wait_for_function("() => !document.querySelector('#conv .msg.placeholder')")
        assert visible(page) == expected(store, sid, seq + 1)
        assert len(answers) == 1
        assert answers[0]["have"] == seq
        assert sum("same" not in m for m in answers[0]["messages"]) == 1
