"""The verify badge: the chain up to the shown seq, against an anchor when given, and a
store whose bytes were damaged shows a failing badge (API and the real page)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs
import pytest
from playwright.sync_api import Browser, Page
from starlette.testclient import TestClient

from engine.store import MemoryStore, open_store
from engine.store import anchor as anchoring
from engine.store.base import Store
from projections.demo import record_demo
from projections.serve import verifying
from projections.serve.app import create_app
from projections.serve.verifying import shareable, verify_elsewhere, verify_json
from tests.support.browser import LOOPBACK, serving


@attrs.frozen
class Jsonl:
    url: str
    sid: str
    version: int
    file: Path  # the session's log, one JSON line per event
    anchor: anchoring.Anchor  # taken while the log was sound


@pytest.fixture
def jsonl(tmp_path: Path) -> Jsonl:
    url = f"jsonl:///{tmp_path / 'store'}"
    with open_store(url) as store:
        s = record_demo(store)
        (anchor,) = anchoring.take(store, s.id)
        version = s.version
    return Jsonl(url, s.id, version, tmp_path / "store" / "sessions" / f"{s.id}.jsonl", anchor)


def damage(j: Jsonl) -> int:
    """Change one character of the user's text in the file; returns the seq it is in."""
    lines = j.file.read_bytes().split(b"\n")
    seq = next(i for i, line in enumerate(lines, 1) if b"since yesterday" in line)
    lines[seq - 1] = lines[seq - 1].replace(b"since yesterday", b"since yesterdaY")
    j.file.write_bytes(b"\n".join(lines))
    return seq


def rewritten(a: anchoring.Anchor) -> anchoring.Anchor:
    """The anchor of a log whose history differs (as if it were rewritten after)."""
    return attrs.evolve(a, hash=bytes(b ^ 0xFF for b in a.hash))


@contextmanager
def opened(url: str) -> Iterator[Store]:
    store = open_store(url, create=False)
    try:
        yield store
    finally:
        store.close()


@contextmanager
def badge(browser: Browser, store: Store, path: str,
          anchors: list[anchoring.Anchor] | None = None) -> Iterator[tuple[str, str, Page]]:
    """The page open at ``path`` once its badge has an answer: its text and classes."""
    page = browser.new_page()
    try:
        with serving(create_app(store, anchors=anchors or [])) as base:
            page.goto(base + path)
            page.wait_for_selector("#verify.ok, #verify.bad")
            text = page.text_content("#verify") or ""
            yield text, (page.get_attribute("#verify", "class") or ""), page
    finally:
        page.close()


def test_verify_answers_against_an_anchor(jsonl: Jsonl) -> None:
    with opened(jsonl.url) as store:
        sound = TestClient(create_app(store, anchors=[jsonl.anchor]), base_url=LOOPBACK)
        got = sound.get(f"/api/sessions/{jsonl.sid}/verify").json()
        assert got == {"ok": True, "version": jsonl.version, "verified_upto": jsonl.version,
                       "problem": None, "anchor": {"seq": jsonl.anchor.seq, "holds": True}}
        other = TestClient(create_app(store, anchors=[rewritten(jsonl.anchor)]),
                           base_url=LOOPBACK)
        got = other.get(f"/api/sessions/{jsonl.sid}/verify").json()
        assert got["ok"] is False
        assert got["anchor"] == {"seq": jsonl.anchor.seq, "holds": False}
        assert "anchor" in got["problem"]


def test_a_damaged_byte_fails_the_chain(jsonl: Jsonl) -> None:
    seq = damage(jsonl)
    with opened(jsonl.url) as store:
        got = TestClient(create_app(store), base_url=LOOPBACK).get(
            f"/api/sessions/{jsonl.sid}/verify").json()
    assert got["ok"] is False
    assert got["verified_upto"] == seq - 1
    assert f"seq {seq}" in got["problem"]


def test_the_page_shows_the_anchor_holding(browser: Browser, jsonl: Jsonl) -> None:
    with opened(jsonl.url) as store:
        with badge(browser, store, f"/?session={jsonl.sid}&seq=20",
                   [jsonl.anchor]) as (text, cls, _):
            assert "ok" in cls.split()
            assert text == f"✓ chain verified to seq 20 · anchor at seq {jsonl.anchor.seq} holds"
        with badge(browser, store, f"/?session={jsonl.sid}",
                   [rewritten(jsonl.anchor)]) as (text, cls, page):
            assert "bad" in cls.split()
            assert text == f"✗ anchor at seq {jsonl.anchor.seq} fails"
            assert "anchor" in (page.get_attribute("#verify", "title") or "")


def test_the_page_shows_a_tampered_store_failing(browser: Browser, jsonl: Jsonl) -> None:
    seq = damage(jsonl)
    with opened(jsonl.url) as store, \
            badge(browser, store, f"/?session={jsonl.sid}") as (text, cls, page):
        assert "bad" in cls.split()
        assert text == f"✗ chain broken at seq {seq}"
        assert "hash mismatch" in (page.get_attribute("#verify", "title") or "")
        # Before the damage the log is sound, and the badge still says where it breaks.
        page.keyboard.press("Home")
        page.wait_for_selector('body[data-shown-seq="0"]')
        assert page.text_content("#verify") == (
            f"✗ chain broken at seq {seq} (sound up to seq {seq - 1})")


def test_an_anchored_session_missing_from_the_store_is_named(browser: Browser,
                                                            jsonl: Jsonl) -> None:
    gone = attrs.evolve(jsonl.anchor, session_id="0190e0e0-0000-7000-8000-000000000000")
    with opened(jsonl.url) as store, \
            badge(browser, store, f"/?session={jsonl.sid}", [gone]) as (_, _, page):
        page.wait_for_selector("#anchorwarn:not([hidden])")
        assert gone.session_id in (page.text_content("#anchorwarn") or "")


def test_a_file_store_is_verified_in_a_child_with_the_same_answer(jsonl: Jsonl) -> None:
    seq = damage(jsonl)
    with opened(jsonl.url) as store:
        assert shareable(store)
        assert not shareable(MemoryStore())
        for anchor in (None, jsonl.anchor, rewritten(jsonl.anchor)):
            here = verify_json(store, jsonl.sid, anchor)
            assert verify_elsewhere(store, jsonl.sid, anchor) == here
            assert here["verified_upto"] == seq - 1


def test_the_verify_child_gives_way_to_the_server(jsonl: Jsonl) -> None:
    """A verification (a minute of CPU at 1M events) runs below the server's priority,
    so that on a busy machine the page's answers are scheduled first."""
    with opened(jsonl.url) as store:
        verify_elsewhere(store, jsonl.sid, None)
        assert verifying._pool is not None
        mine = os.getpriority(os.PRIO_PROCESS, 0)
        for pid in verifying._pool._processes:
            assert os.getpriority(os.PRIO_PROCESS, pid) == min(19, mine + verifying.VERIFY_NICE)
