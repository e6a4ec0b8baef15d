"""``render_html``: one self-contained file whose inlined data cannot break out of its element."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from playwright.sync_api import Browser

from benchmarks.export import record, record_tools
from engine import events as ev
from engine.session import Session
from engine.store import open_store
from engine.store.base import Store
from projections.dispatch import handlers
from projections.serve.export import (
    CHUNK,
    FRAME_EVERY,
    export_data,
    render_html,
    script_json,
    write_html,
)
from projections.timetravel import at
from projections.withparts import WithPartsProjection
from tests.support.export_sessions import streamed_session
from tests.viewer.conftest import Sessions


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda kids: st.lists(kids, max_size=4)
                    | st.dictionaries(st.text(max_size=8), kids, max_size=4), max_leaves=12))
def testscript_json_round_trips_and_never_holds_markup(value: object) -> None:
    text = script_json(value)
    assert not set(text) & {"<", ">", "&"}  # so no </script>, <!--, or entity can appear
    assert json.loads(text) == value


@settings(max_examples=20, deadline=None)
@given(st.text(min_size=1, max_size=40))
def test_any_logged_text_stays_inside_the_data_element(text: str) -> None:
    with open_store("sqlite:///:memory:") as store:
        s = Session.create(store)
        s.user_message(f"</script><script>{text}")
        page = render_html(store, s.id)
    # The head, the data's pieces, the markdown renderer and the app: no element opened or
    # closed by the text.
    pieces = len(re.findall(r'<script type="application/json" class="convlog-piece">', page))
    assert pieces == 1
    assert len(re.findall(r"<script\b", page)) == 3 + pieces
    assert len(re.findall(r"</script", page)) == 3 + pieces


def test_export_holds_every_state(browser: Browser,
                                  viewer_store: tuple[Store, Sessions]) -> None:
    store, s = viewer_store
    for sid in (s.demo, s.fork):
        data = export_data(store, sid)["session"]
        assert len(data["changes"]) == store.version(sid) + 1
        got = page_states(browser, render_html(store, sid), store.version(sid))
        for seq, state in enumerate(got):
            assert json.loads(state) == at(store, sid, seq).to_json(), seq
        # An info or a part is stored when an event changes it, not once per seq.
        assert len(data["infos"]) + len(data["parts"]) <= store.version(sid)

# From the last seq down: a rebuild that changed the data it started from would then
# show a later state at an earlier seq.
STATES_JS = ("n => Array.from({length: n + 1},"
             " (_, i) => JSON.stringify(convlogExport.state(n - i))).reverse()")


def page_states(browser: Browser, html: str, last: int) -> list[str]:
    """Every state of an exported page, as its own script rebuilds them, in its JSON."""
    page = browser.new_page()
    try:
        page.set_content(html)
        states: list[str] = page.evaluate(STATES_JS, last)
    finally:
        page.close()
    return states


def folded_states(store: Store, sid: str) -> list[str]:
    """The WithParts projection's JSON after each event of ``sid``'s log."""
    proj = WithPartsProjection(sid)
    out = [dumps(proj.to_json())]
    for e in store.read(sid):
        proj.apply(e)
        out.append(dumps(proj.to_json()))
    return out


def dumps(value: object) -> str:
    """``value``'s JSON as JavaScript writes it (one number type: 0.0 is written 0)."""
    return json.dumps(js_numbers(value), ensure_ascii=False, separators=(",", ":"))


def js_numbers(value: object) -> object:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: js_numbers(x) for k, x in value.items()}
    if isinstance(value, list):
        return [js_numbers(x) for x in value]
    return value


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_the_page_shows_the_projection_at_every_seq(browser: Browser, data: st.DataObject
                                                    ) -> None:
    frame_every = data.draw(st.sampled_from([1, 3, 16, FRAME_EVERY]), label="frame_every")
    # The file's data in pieces of this many events (the writer streams them).
    chunk = data.draw(st.sampled_from([1, 2, 7, CHUNK]), label="chunk")
    with open_store("sqlite:///:memory:") as store:
        sid = data.draw(streamed_session(store))
        want = folded_states(store, sid)
        html = render_html(store, sid, frame_every=frame_every, chunk=chunk)
        got = page_states(browser, html, store.version(sid))
    assert len(got) == len(want)
    for seq, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g == w, seq


def test_a_long_stream_scrubs_exactly_across_frames(browser: Browser) -> None:
    """Many deltas to a few parts, past several frames, with a frame in the middle of a
    run (the page appends deltas stored before the frame it starts from)."""
    with open_store("sqlite:///:memory:") as store:
        s = Session.create(store)
        s.create_conversation()
        m = s.start_message("assistant")
        text, tool = s.add_text(m), s.add_tool(m, "call_1", "bash")
        for i in range(3 * FRAME_EVERY):
            s.text_delta(text, f"t{i}<")
            if i % 7 == 0:
                s.tool_input_delta(tool, f'{{"i":{i}}}')
            if i == FRAME_EVERY:
                s.add_context_file("a.py")  # names no message: a frame
        s.end_part(text)
        want = folded_states(store, s.id)
        got = page_states(browser, render_html(store, s.id), s.version)
    assert got == want


def test_the_export_grows_linearly_with_the_deltas() -> None:
    """Twice the deltas, about twice the bytes: a full message per delta made it 4x."""
    def size(deltas: int) -> int:
        with open_store("sqlite:///:memory:") as store:
            return len(render_html(store, record(store, deltas)).encode())

    small, big = size(2000), size(4000)
    assert big < 2.5 * small, (small, big)


def test_a_message_with_many_tool_calls_scrubs_exactly(browser: Browser) -> None:
    """An agent's step loop in one message, past frames spaced by its growing size."""
    with open_store("sqlite:///:memory:") as store:
        sid = record_tools(store, 60)
        want = folded_states(store, sid)
        got = page_states(browser, render_html(store, sid), store.version(sid))
    assert got == want


def test_the_export_grows_linearly_with_the_tool_calls() -> None:
    """4x the calls in one message, about 4x the data: the whole message per event
    (each call's added, ready, running, completed, its text's added and ended) made it 16x."""
    def size(calls: int) -> int:
        with open_store("sqlite:///:memory:") as store:
            return len(script_json(export_data(store, record_tools(store, calls))))

    small, big = size(25), size(100)
    assert big < 6 * small, (small, big)


def test_every_event_the_fold_handles_names_its_message() -> None:
    """The export stores, per event, only the message (or the one part) the event names:
    sound only while every event WithParts folds is a message event and the rest are
    ignored (the property tests above check that a part event changes only its part)."""
    folded = set(handlers(WithPartsProjection))
    assert folded, "no handlers found"
    assert all(issubclass(t, ev.MessageEvent) for t in folded), folded
    assert ev.PartEvent in {b for t in folded for b in t.__mro__}


def test_the_writer_holds_no_more_than_a_piece(tmp_path: Path) -> None:
    """The file is written piece by piece: with pieces of 50 events, a write happens every
    50 events, not once at the end (a whole-session string held 5.2 GB at 1M events)."""
    with open_store("sqlite:///:memory:") as store:
        sid = record(store, 2000)
        version = store.version(sid)
        writes: list[int] = []

        class Out(io.StringIO):
            def write(self, text: str) -> int:
                writes.append(len(text))
                return super().write(text)

        out = Out()
        write_html(store, sid, out, chunk=50)
        assert out.getvalue() == render_html(store, sid, chunk=50)
    pieces = out.getvalue().count('class="convlog-piece"')
    assert pieces == version // 50 + 1
    biggest_piece = max(writes[2:-2])  # the page's head, the app and its tail aside
    assert biggest_piece < len(out.getvalue()) / 10
