"""docs/architecture.md's "Adding a facet" holds: a property of a part of any kind has
a home in the tables (a facet entity), and its refusals are worded from that home.

The doc's two blocks are applied, as written there, to a copy of the engine; a
subprocess imports the copy (the real catalog stays untouched) and pins parts of
every kind, in every state, on an open and a completed message, and checks each
refusal names the pin's own states, not the part's table (the toy ``part.pinned`` of
issue 31 was refused on a finished text part with "valid next states: none
(terminal)", worded from the stream part's table).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.doc_example import doc_blocks, insert_after

ROOT = Path(__file__).resolve().parents[2]
SECTION = "## Adding a facet"

CHECK = r'''
import sys
sys.path.insert(0, sys.argv[1])
import engine
assert engine.__file__.startswith(sys.argv[1]), engine.__file__

from engine import IllegalTransition, MemoryStore, Session, docgen
from engine import events as ev
from engine import messages as ms
from engine import tables as tb
from engine.codec import decode_json
from engine.store.verify import verify

pin, unpin = ev.PartPinned, ev.PartUnpinned
[facet] = ms.FACETS
assert ms.FACET_OF == {pin: facet, unpin: facet}
assert facet.table in tb.TABLES and pin not in tb.PART_TABLE and pin not in tb.NEEDS_OPEN_MESSAGE

store = MemoryStore()
session = Session.create(store)
mid = session.start_message("assistant")
text = session.add_text(mid, "done", streaming=False)        # a stream part, done
live = session.add_text(mid, "stream")                       # a stream part, streaming
tool = session.add_tool(mid, "c1", "bash")
session.start_tool(tool, input={"cmd": "ls"})                # a tool, running
file = session.add_file(mid, "text/plain", "file:///a")      # a complete-on-add part


def refusal(e):
    try:
        session.append([e])
    except IllegalTransition as exc:
        return exc
    raise AssertionError(f"{e} must be refused")


def on(ref, cls):
    return cls(message_id=ref.message_id, part_id=ref.part_id)


for ref in (text, live, tool, file):
    [seq] = session.append([on(ref, pin)])
    assert session.append([on(ref, pin)]) == [seq]  # an identical retry is a no-op
# The part itself did not move: the stream still streams, the tool still runs.
session.text_delta(live, "ing")
session.end_part(live)
session.complete_tool(tool, "ok")

# Refusals are worded from the pin's table, whatever the part's kind and state.
[unpinned] = session.append([on(text, unpin)])
assert session.append([on(text, unpin)]) == [unpinned]  # a repeat, not a refusal
before = session.version
never = session.add_file(mid, "text/plain", "file:///b")  # a part never pinned
before += 1
exc = refusal(on(never, unpin))
assert (exc.entity, exc.current, exc.valid, exc.valid_events) == (
    "pin", "absent", ("pinned",), ("part.pinned",)), exc
assert "none (terminal)" not in str(exc), exc
assert f"the pin of part {never.part_id} is absent" in str(exc), exc
exc = refusal(ev.PartUnpinned(message_id=mid, part_id="nosuch"))
assert (exc.entity, exc.current, exc.valid) == ("pin", "part absent", ("pinned",)), exc
assert "part nosuch does not exist" in str(exc) and "none (terminal)" not in str(exc), exc
exc = refusal(unpin(message_id="0194d1e0-0000-7000-8000-000000000000", part_id="p"))
assert exc.entity == "message" and "does not exist" in str(exc), exc
assert session.version == before  # a refusal writes nothing

# A facet annotates: it stays legal once the message is completed.
session.complete_message(mid)
line = '{"type": "part.unpinned", "message_id": "%s", "part_id": "%s"}' % (mid, tool.part_id)
[seq] = session.append([decode_json(line)])
stored = list(store.read(session.id))[-1]
assert (type(stored), stored.seq, stored.actor) == (unpin, seq, "user")
exc = refusal(on(never, unpin))  # refused by the pin, not by the completed message
assert (exc.entity, exc.current) == ("pin", "absent"), exc
# A fresh writer replays the facets; verify judges them again.
again = Session.open(store, session.id)
assert again.append([on(tool, unpin)]) == [seq]  # the repeat is still a no-op
assert again.lifecycle.message_decider.facets[(mid, text.part_id, "pin")][0] == "unpinned"
report = verify(store, session.id)
assert report.ok and report.events == session.version, report.problems

assert "## pin" in docgen.render_transitions() and "`part.pinned`" in docgen.render_transitions()
assert "### part.pinned" in docgen.render_events()
print("pin: ok")
'''


def test_the_worked_example_adds_a_facet(tmp_path: Path) -> None:
    events, facet = doc_blocks(SECTION)
    assert events.startswith("class PartPinned(")
    copy = tmp_path / "engine"
    shutil.copytree(ROOT / "engine", copy, ignore=shutil.ignore_patterns("__pycache__"))
    insert_after(copy / "events.py", "# --------------------------------------------------"
                 "------------------------- conversation\n", "\n\n" + events + "\n\n")
    insert_after(copy / "events.py", "    | CompactionAdded\n",
                 "    | PartPinned\n    | PartUnpinned\n")
    insert_after(copy / "messages.py",
                 "FACETS: Final[tuple[FacetEntity, ...]] = (\n", facet)
    done = subprocess.run([sys.executable, "-c", CHECK, str(tmp_path)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "pin: ok"


def test_the_real_catalog_has_no_pin() -> None:
    """The example ran in a copy: the engine under test is unchanged."""
    from engine import events as ev  # noqa: PLC0415

    assert "part.pinned" not in ev.EVENT_BY_TAG
