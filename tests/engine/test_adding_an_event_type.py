"""docs/architecture.md's "Adding an event type" holds: one declaration and one row.

The doc's two code blocks are applied, exactly as written there, to a copy of the
engine; a subprocess (so the real catalog stays untouched) imports the copy and
checks that the new type reached every derived catalog, that a session accepts it
under its entity's rules, and that the generated reference pages list it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.doc_example import doc_blocks, insert_after

ROOT = Path(__file__).resolve().parents[2]
SECTION = "## Adding an event type"

CHECK = r'''
import sys
sys.path.insert(0, sys.argv[1])
import engine
assert engine.__file__.startswith(sys.argv[1]), engine.__file__

from engine import MemoryStore, PartValidationError, IllegalTransition, Session
from engine import docgen
from engine import events as ev
from engine import tables as tb
from engine.codec import decode_json

cls = ev.NoteAdded
assert cls in ev.EVENT_TYPES and ev.EVENT_BY_TAG["note.added"] is cls
assert (ev.DEFAULT_ACTOR[cls], ev.SCHEMA_VERSION[cls]) == ("user", 1)
assert tb.PART_KIND[cls] == "note" and tb.PART_TABLE[cls] is tb.PART
assert cls in tb.NEEDS_OPEN_MESSAGE
assert ("absent", cls) in tb.PART.index

session = Session.create(MemoryStore())
mid = session.start_message("user")
line = '{"type": "note.added", "message_id": "%s", "part_id": "n1", "text": "pinned"}' % mid
[seq] = session.append([decode_json(line)])
stored = list(session.store.read(session.id))[-1]
assert (type(stored), stored.seq, stored.actor, stored.text) == (cls, seq, "user", "pinned")
assert session.append([decode_json(line)]) == [seq]  # an identical retry is a no-op
try:
    session.append([cls(message_id=mid, part_id="", text="x")])
except PartValidationError as exc:
    assert exc.rule == "BR-01", exc
else:
    raise AssertionError("an empty part id must be refused")
session.complete_message(mid)
try:
    session.append([cls(message_id=mid, part_id="n2", text="late")])
except IllegalTransition as exc:
    assert exc.current == "message completed", exc
else:
    raise AssertionError("a note on a completed message must be refused")

assert "### note.added" in docgen.render_events()
assert "`note.added`" in docgen.render_transitions()
print("note.added: ok")
'''


def test_the_worked_example_adds_an_event_type(tmp_path: Path) -> None:
    declaration, row = doc_blocks(SECTION)
    assert declaration.startswith("class NoteAdded(")
    assert row.strip() == 'ev.NoteAdded: "note",'
    copy = tmp_path / "engine"
    shutil.copytree(ROOT / "engine", copy, ignore=shutil.ignore_patterns("__pycache__"))
    # Step 1: the declaration, and its name in the union.
    insert_after(copy / "events.py", "# --------------------------------------------------"
                 "------------------------- conversation\n", "\n\n" + declaration + "\n\n")
    insert_after(copy / "events.py", "    | CompactionAdded\n", "    | NoteAdded\n")
    # Step 2: its row, in the entity that owns it.
    insert_after(copy / "messages.py", "_COMPLETE_ON_ADD: Final[dict[type[Event], str]] = {\n",
                 row)
    done = subprocess.run([sys.executable, "-c", CHECK, str(tmp_path)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "note.added: ok"  # after any log lines


def test_the_real_catalog_has_no_note() -> None:
    """The example ran in a copy: the engine under test is unchanged."""
    from engine import events as ev  # noqa: PLC0415

    assert "note.added" not in ev.EVENT_BY_TAG
