"""Every part view shares one base (``PartBase``, OpenCode's ``partBase``): a field on
every part is one edit.

The edit is made for real, in a copy of ``projections``: one keyword-only field is
added to ``PartBase``, and a subprocess checks that every part kind gained it, that
the golden sessions still fold to the same JSON byte for byte while it is unset, and
that once set it is written under its seed name, read back, and kept by the
snapshot chunks.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import typing
from pathlib import Path

import attrs

from projections import views as v

ROOT = Path(__file__).resolve().parents[2]
PARTS = typing.get_args(v.Part)
BASE = tuple(a.name for a in attrs.fields(v.PartBase))

# The one edit: a line added to PartBase's body, after its last field.
ANCHOR = "    session_id: str\n    message_id: str\n"
EDIT = "    pinned: bool | None = attrs.field(default=None, kw_only=True)\n"

CHECK = r'''
import gzip, json, sys
sys.path.insert(0, sys.argv[1])
import projections
assert projections.__file__.startswith(sys.argv[1]), projections.__file__
import typing
import attrs
from engine import codec
from projections import views as v
from projections.json import converter
from projections.snapshot_codec import decode_chunk, encode_chunk
from projections.withparts import WithPartsProjection

parts = typing.get_args(v.Part)
assert all("pinned" in attrs.fields_dict(p) for p in parts), parts

kinds = set()
with gzip.open(sys.argv[2], "rt", encoding="utf-8") as f:
    cases = [json.loads(line) for line in f]
for case in cases:
    events = [codec.decode_json(json.dumps(e)) for e in case["events"]]
    k, expected = case["json"][-1]
    proj = WithPartsProjection(events[0].session_id).apply_all(events[:k])
    got = proj.to_json()
    # Unset, the new field is absent: the JSON is what it was, byte for byte.
    # (less a tool part's "raw", added since the golden file was written: issue 24)
    before = [{**m, "parts": [{k: x for k, x in p.items() if k != "raw"}
                              if p.get("type") == "tool" else p for p in m["parts"]]}
              for m in got]
    assert json.dumps(before, ensure_ascii=False) == expected
    pinned = [v.WithParts(m.info, [attrs.evolve(p, pinned=True) for p in m.parts])
              for m in proj.messages()]
    for message in pinned:
        data = converter.unstructure(message)
        for part in data["parts"]:
            assert part["pinned"] is True, part
            kinds.add(part["type"])
        assert converter.structure(data, v.WithParts) == message
        assert decode_chunk(encode_chunk(message)) == message
print(" ".join(sorted(kinds)))
'''


def test_every_part_view_starts_with_the_base_fields() -> None:
    assert BASE == ("id", "session_id", "message_id")
    for part in PARTS:
        assert issubclass(part, v.PartBase), part
        names = tuple(a.name for a in attrs.fields(part))
        assert names[:len(BASE)] == BASE, part
        # Declared once: no part repeats a base field in its own body.
        assert not set(part.__annotations__) & set(BASE), part


def test_a_field_on_every_part_is_one_edit(tmp_path: Path) -> None:
    copy = tmp_path / "projections"
    shutil.copytree(ROOT / "projections", copy, ignore=shutil.ignore_patterns("__pycache__"))
    views = copy / "views.py"
    source = views.read_text(encoding="utf-8")
    base = source.index("class PartBase:")
    at = source.index(ANCHOR, base) + len(ANCHOR)
    views.write_text(source[:at] + EDIT + source[at:], encoding="utf-8")
    golden = Path(__file__).parent / "data" / "withparts_golden.jsonl.gz"
    done = subprocess.run([sys.executable, "-c", CHECK, str(tmp_path), str(golden)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    kinds = set(done.stdout.split())
    assert kinds == {p.TAG for p in PARTS}, kinds  # every kind was set, written, read
