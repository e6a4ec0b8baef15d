"""Agent credentials (issue 27, item 6): salted scrypt verifiers in the log, never
printed; the CLI verbs that manage them; demo never deletes a mailbox."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from engine import events as ev
from engine.cli.app import main
from engine.mailbox import MailboxError
from engine.mailbox_credentials import make_verifier, matches, well_formed
from engine.store import open_store
from projections.mailbox import MAILBOX_SESSION, Mailbox
from projections.serve.app import create_app
from tests.support.browser import LOOPBACK


def test_verifiers_are_salted_scrypt() -> None:
    one, two = make_verifier("hunter2"), make_verifier("hunter2")
    assert one.startswith("scrypt$")
    assert one != two
    assert matches(one, "hunter2")
    assert matches(two, "hunter2")
    assert not matches(one, "hunter3")
    assert well_formed(one)
    assert not well_formed("scrypt$3$8$1$AA$AA")
    import hashlib  # noqa: PLC0415

    legacy = hashlib.sha256(b"old").hexdigest()  # logs written before stay usable
    assert matches(legacy, "old")
    assert not matches(legacy, "new")


def _store_with_credential(url: str) -> str:
    store = open_store(url)
    try:
        mb = Mailbox(store, "p")
        mb.create_project("/w")
        mb.register_agent("agent-a", passkey="first-secret")
        mb.assign("agent-a")
        mb.set_credential("agent-a", "second-secret")
        with pytest.raises(MailboxError, match="invalid_credentials"):
            mb.authenticate("agent-a", "first-secret")
        assert mb.authenticate("agent-a", "second-secret")
        stored = [e.passkey_hash for e in store.read(MAILBOX_SESSION)
                  if isinstance(e, ev.AgentRegistered | ev.AgentCredentialSet)]
        assert all(h is not None and h.startswith("scrypt$") for h in stored)
        return "|".join(h or "" for h in stored)
    finally:
        store.close()


def test_no_output_prints_a_verifier(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`convlog tail` printed the passkey hash; so did show, export and the viewer."""
    url = f"sqlite:///{tmp_path}/m.db"
    verifiers = _store_with_credential(url)
    salts = [v.split("$")[4] for v in verifiers.split("|")]
    capsys.readouterr()
    outputs = []
    for argv in (["tail", url],
                 ["show", url, "--session", MAILBOX_SESSION, "--as", "events"],
                 ["show", url, "--session", MAILBOX_SESSION, "--as", "events", "--json"],
                 ["export", url, "--session", MAILBOX_SESSION, "--as", "events"]):
        assert main(argv) == 0, argv
        outputs.append(capsys.readouterr().out)
    store = open_store(url)
    try:
        page = TestClient(create_app(store), base_url=LOOPBACK).get(
            f"/api/sessions/{MAILBOX_SESSION}/events")
        outputs.append(page.text)
    finally:
        store.close()
    for out in outputs:
        assert "redacted" in out
        for salt in salts:
            assert salt not in out
        assert not re.search(r"scrypt\$\d", out)


def test_the_management_verbs(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                              monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path}/m.db"
    run = ["--store", url]
    assert main(["mailbox", "project", "create", "p", "--dir", "/w", *run]) == 0
    assert main(["mailbox", "agent", "add", "a", "--project", "p", "--generate-credential",
                 *run]) == 0
    key_a = capsys.readouterr().out.strip().splitlines()[-1]
    (tmp_path / "b.key").write_text("b-secret\n")
    assert main(["mailbox", "agent", "add", "b", "--project", "p", "--credential-file",
                 str(tmp_path / "b.key"), *run]) == 0
    monkeypatch.setattr("sys.stdin", io.StringIO("b-new\n"))
    assert main(["mailbox", "credential", "b", "--credential-stdin", *run]) == 0
    assert main(["mailbox", "token", "issue", "a", "--project", "p", *run]) == 0
    token = capsys.readouterr().out.strip().splitlines()[-1]
    store = open_store(url)
    try:
        mb = Mailbox(store, "p")
        assert mb.agent_of(token) == "a"
        assert mb.authenticate("a", key_a, require_credential=True)
        assert mb.authenticate("b", "b-new", require_credential=True)
        with pytest.raises(MailboxError, match="invalid_credentials"):
            mb.authenticate("b", "b-secret")
    finally:
        store.close()
    assert main(["mailbox", "agents", "--project", "p", *run]) == 0
    assert '"status": "online"' in capsys.readouterr().out
    monkeypatch.setattr("sys.stdin", io.StringIO(token + "\n"))
    assert main(["mailbox", "token", "revoke", "--project", "p", *run]) == 0
    assert main(["mailbox", "agent", "remove", "b", "--project", "p", *run]) == 0
    store = open_store(url)
    try:
        mb = Mailbox(store, "p")
        with pytest.raises(MailboxError, match="invalid_session_token"):
            mb.agent_of(token)
        assert [a.id for a in mb.agents()] == ["a"]
    finally:
        store.close()
    assert main(["mailbox", "credential", "nobody", "--generate-credential", *run]) == 3
    assert "agent_not_found" in capsys.readouterr().err


def test_the_mailbox_has_its_own_default_store_and_demo_never_deletes_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 27, item 7: the mailbox defaulted to convlog-demo.db, which demo deletes."""
    monkeypatch.chdir(tmp_path)
    assert main(["mailbox", "project", "create", "p", "--dir", "/w"]) == 0
    assert (tmp_path / "convlog-mailbox.db").exists()
    assert not (tmp_path / "convlog-demo.db").exists()
    # A store that holds a mailbox (or anything but the demo) survives `demo`.
    url = f"sqlite:///{tmp_path}/shared.db"
    assert main(["mailbox", "project", "create", "p", "--dir", "/w", "--store", url]) == 0
    before = (tmp_path / "shared.db").read_bytes()
    capsys.readouterr()
    assert main(["demo", "--store", url]) == 2
    assert "not deleting it" in capsys.readouterr().err
    assert (tmp_path / "shared.db").read_bytes() == before
    # Its own demo store is still recreated every run.
    assert main(["demo"]) == 0
    assert main(["demo"]) == 0


def test_read_verbs_never_create_a_mailbox(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path}/m.db"
    store = open_store(url)
    store.close()
    for argv in (["mailbox", "agents", "--project", "p", "--store", url],
                 ["mailbox", "export", str(tmp_path / "out"), "--project", "p", "--store", url]):
        assert main(argv) == 2
        assert "has no mailbox" in capsys.readouterr().err
    store = open_store(url)
    try:
        assert MAILBOX_SESSION not in {i.id for i in store.sessions()}
    finally:
        store.close()
