"""``render_html``: one self-contained file whose inlined data cannot break out of its element."""

from __future__ import annotations

import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.session import Session
from engine.store import open_store
from engine.store.base import Store
from projections.serve.export import export_data, render_html, script_json
from projections.timetravel import at
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
    assert len(re.findall(r"<script\b", page)) == 2  # the data element and the app
    assert len(re.findall(r"</script", page)) == 2


def test_export_holds_every_state(viewer_store: tuple[Store, Sessions]) -> None:
    store, s = viewer_store
    for sid in (s.demo, s.fork):
        data = export_data(store, sid)["session"]
        assert len(data["states"]) == store.version(sid) + 1
        for seq, state in enumerate(data["states"]):
            got = [data["versions"][i] for i in state]
            assert got == at(store, sid, seq).to_json(), seq
        # Each distinct message version is stored once, not once per seq.
        assert len(data["versions"]) <= store.version(sid)
