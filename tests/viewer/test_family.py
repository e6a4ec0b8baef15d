"""Subagents and forks navigable, in a real browser: a Task call links to its child
session and the child back to the call; the branch graph of a session's family."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlparse

from playwright.sync_api import Browser, Page

from engine.importers.detect import plan_path
from engine.importers.write import write_plan
from engine.store import MemoryStore
from projections.serve.app import create_app
from projections.serve.state import Viewer, sessions_json
from tests.support.browser import serving

# A Claude Code session with a fork (a rewind), and two subagents, one run by a Task call.
FIXTURE = (Path(__file__).resolve().parents[1] / "fixtures" / "transcripts" / "claude-code"
           / "5b1f0e6e-4a5d-4c1e-9d55-0a1b2c3d4e5f.jsonl")


def imported() -> tuple[MemoryStore, dict[str, dict[str, object]]]:
    store = MemoryStore()
    write_plan(store, plan_path(FIXTURE))
    return store, {str(r["id"]): r for r in sessions_json(store)}


def sid_of(page: Page) -> str:
    return parse_qs(urlparse(page.url).query)["session"][0]


def test_a_task_call_opens_its_subagent_and_the_subagent_leads_back(browser: Browser) -> None:
    store, rows = imported()
    main = next(k for k, r in rows.items() if not r["parent"] and not r["child_of"])
    viewer = Viewer(store, background=False)
    linked = [k for k, r in rows.items() if r["child_of"] == main
              and viewer.spawner(main, k)["found"]]
    assert len(linked) == 1
    child = linked[0]
    where = viewer.spawner(main, child)
    assert where["seq"] is not None
    with serving(create_app(store)) as base:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{base}/?session={main}")
        link = page.wait_for_selector(f'.childlink[data-child="{child}"]')
        assert link is not None
        assert "Review test_app.py for mistakes" in (link.text_content() or "")
        link.click()
        page.wait_for_function(f"() => location.search.includes('{child}')")
        page.wait_for_selector(f'body[data-shown-seq="{rows[child]["version"]}"]')
        back = page.wait_for_selector("#spawnedby:not([hidden])")
        assert back is not None
        assert "Fix the failing test" in (back.text_content() or "")
        back.click()
        page.wait_for_selector(f'body[data-shown-seq="{where["seq"]}"]')
        assert sid_of(page) == main
        # The message with the call is the one brought on screen.
        page.wait_for_selector(f'[data-msg="{where["message"]}"]')
        page.go_back()  # opening a session adds a history entry: back is the subagent
        page.wait_for_function(f"() => location.search.includes('{child}')")
        page.close()


def test_the_branch_graph_shows_forks_at_their_fork_point_and_subagents(
        browser: Browser) -> None:
    store, rows = imported()
    main = next(k for k, r in rows.items() if not r["parent"] and not r["child_of"])
    fork = next(k for k, r in rows.items() if r["parent"] == main)
    with serving(create_app(store)) as base:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{base}/?session={fork}")
        page.wait_for_selector(f'body[data-shown-seq="{rows[fork]["version"]}"]')
        page.click("#branchbtn")
        page.wait_for_selector("#branches .branch")
        got = page.eval_on_selector_all("#branches .branch", """ns => ns.map(n => ({
            sid: n.dataset.sid, kind: n.className, left: n.querySelector('.bbar').style.left,
            width: n.querySelector('.bbar').style.width }))""")
        assert {g["sid"] for g in got} == set(rows)  # the root, its fork, two subagents
        by = {g["sid"]: g for g in got}
        assert "current" in by[fork]["kind"]
        assert "fork" in by[fork]["kind"]
        most = max(int(str(r["version"])) for r in rows.values())
        fork_seq = int(str(rows[fork]["fork_seq"]))
        assert abs(float(by[fork]["left"].rstrip("%")) - fork_seq / most * 100) < 0.01
        assert float(by[main]["left"].rstrip("%")) == 0
        kids = [g for g in got if "child" in g["kind"]]
        assert len(kids) == 2
        page.click(f'#branches .branch[data-sid="{main}"]')
        page.wait_for_selector(f'body[data-shown-seq="{rows[main]["version"]}"]')
        assert sid_of(page) == main
        assert page.get_attribute(f'#branches .branch[data-sid="{main}"]', "class") == \
            "branch root current"
        page.close()


# Codex 0.171.0 run for real (tests/fixtures/real-cli): a thread that spawned an agent
# (`spawn_agent`, whose output names the new thread), that agent's rollout, and an exec
# fork of the thread.
CODEX = (Path(__file__).resolve().parents[1] / "fixtures" / "real-cli" / "codex-0.171.0"
         / "transcripts")


def test_a_codex_spawn_agent_call_opens_its_agent_and_the_agent_leads_back(
        browser: Browser) -> None:
    store = MemoryStore()
    write_plan(store, plan_path(CODEX))
    rows = {str(r["id"]): r for r in sessions_json(store)}
    main = next(k for k, r in rows.items() if not r["parent"] and not r["child_of"])
    child = next(k for k, r in rows.items() if r["child_of"] == main)
    where = Viewer(store, background=False).spawner(main, child)
    assert where["found"]
    assert where["seq"] is not None
    with serving(create_app(store)) as base:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{base}/?session={main}&seq={where['seq']}")
        link = page.wait_for_selector(f'.childlink[data-child="{child}"]', timeout=15_000)
        assert link is not None
        assert "Run one shell command" in (link.text_content() or "")
        # The link sits in the spawn_agent call, and no other call has one.
        assert page.eval_on_selector_all(
            ".childlink", "ns => ns.map(n => n.closest('.tool').querySelector('.name')"
            ".textContent)") == ["spawn_agent"]
        link.click()
        page.wait_for_function(f"() => location.search.includes('{child}')")
        page.wait_for_selector(f'body[data-shown-seq="{rows[child]["version"]}"]')
        back = page.wait_for_selector("#spawnedby:not([hidden])")
        assert back is not None
        assert "Run two shell commands" in (back.text_content() or "")
        back.click()
        page.wait_for_selector(f'body[data-shown-seq="{where["seq"]}"]')
        assert sid_of(page) == main
        page.wait_for_selector(f'[data-msg="{where["message"]}"] .childlink')
        page.close()
