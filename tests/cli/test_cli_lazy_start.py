"""``convlog --help`` and ``--version`` import no command, and a command imports only
its own module: start-up is what a person waits for at every call (issue 30, target 3:
<= 150 ms). Checked in a fresh interpreter, by the modules it loaded, not by a clock."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from engine.cli import catalog
from engine.cli.app import catalog_entries, chosen_command

HEAVY = ("engine.store", "engine.codec", "engine.session", "projections", "structlog",
         "attr", "msgspec", "sqlite3")


def _loaded_after(argv: list[str]) -> tuple[int, set[str]]:
    code = (
        "import json, sys\n"
        "from engine.cli.app import main as run\n"
        f"rc = run({argv!r})\n"
        "print(json.dumps([rc, sorted(sys.modules)]), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, timeout=120)
    rc, modules = json.loads(done.stderr.strip().splitlines()[-1])
    return rc, set(modules)


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["-v", "--help"]])
def test_help_and_version_load_no_command(argv: list[str]) -> None:
    rc, modules = _loaded_after(argv)
    assert rc == 0
    assert _heavy(modules) == []
    assert not any(m.startswith("engine.cli.") and m.split(".")[2] in
                   ("append", "check", "tail") for m in modules)


def test_a_command_loads_only_its_own_module() -> None:
    rc, modules = _loaded_after(["verify", "--help"])
    assert rc == 0
    assert "engine.cli.check" in modules
    assert not any(m.startswith("projections") for m in modules)  # show, serve, ...
    assert "engine.cli.tail" not in modules
    assert "engine.cli.append" not in modules


def test_the_catalog_is_what_the_commands_say() -> None:
    """The generated catalog holds every command (built-in and entry point) with its
    home and help line; `python -m engine.docgen --check` fails when it is stale."""
    assert catalog_entries() == catalog.COMMANDS


@pytest.mark.parametrize(("argv", "name"), [
    (["verify", "x.db"], "verify"),
    (["-v", "--log-level", "debug", "show", "x"], "show"),
    (["--log-level=debug", "tail"], "tail"),
    (["--log-json", "--", "sessions"], "sessions"),
    (["-vv"], None),
    (["--log-level", "info"], None),
])
def test_the_chosen_command_is_the_first_word_after_the_global_options(
        argv: list[str], name: str | None) -> None:
    assert chosen_command(argv) == name


def test_an_unknown_command_is_a_usage_error_naming_the_choices() -> None:
    done = subprocess.run([sys.executable, "-m", "engine", "nosuch"], capture_output=True,
                          text=True, check=False, timeout=120)
    assert done.returncode == 2
    assert "invalid choice" in done.stderr
    assert "verify" in done.stderr


def test_show_of_a_sqlite_store_loads_no_other_store_and_no_catalog_decoder(
        tmp_path: object) -> None:
    """`show` from a SQLite store's snapshots: the JSONL and memory stores' modules stay
    unloaded (engine.store names them lazily), the door is not imported, no typed
    decoder of any engine module is built (the event catalog's, the blocks' and the
    packed columns' are built on first use) and the snapshot chunk codec is not
    compiled (its functions are compiled on first use; the preview check needs only
    its fingerprint)."""
    from pathlib import Path  # noqa: PLC0415

    from benchmarks.workload import record  # noqa: PLC0415
    from engine.store import SQLiteStore  # noqa: PLC0415
    from projections.timetravel import write_snapshots  # noqa: PLC0415

    path = Path(str(tmp_path)) / "s.db"
    with SQLiteStore(str(path)) as store:
        session, _ = record(store, 400)
        write_snapshots(store, session.id, every=100)
    code = (
        "import json, sys\n"
        "import engine.codec as codec\n"
        "from engine.cli.app import main as run\n"
        f"rc = run(['show', 'sqlite:///{path}', '--at', '300'])\n"
        "built = [f'{m}.{n}' for m in sorted(sys.modules) if m.startswith('engine.')\n"
        "         for n, v in vars(sys.modules[m]).items()\n"
        "         if isinstance(v, codec.OnFirstUse) and 'decode' in vars(v)]\n"
        "import msgspec\n"
        "from engine.events import AnyEvent\n"
        "from engine.store.columns import Block, JsonBlock, LazyBlock, NearBlock\n"
        "costly = (AnyEvent, list[AnyEvent], Block, NearBlock, LazyBlock, JsonBlock)\n"
        "built += [f'{m}.{n}' for m in sorted(sys.modules)\n"
        "          if m.startswith(('engine.', 'projections.'))\n"
        "          for n, v in vars(sys.modules[m]).items()\n"
        "          if isinstance(v, msgspec.msgpack.Decoder | msgspec.json.Decoder)\n"
        "          and v.type in costly]\n"
        "from projections import snapshot_codec\n"
        "if snapshot_codec._functions.cache_info().currsize:\n"
        "    built.append('projections.snapshot_codec._functions')\n"
        "print(json.dumps([rc, sorted(sys.modules), built]), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, timeout=120)
    rc, modules, built = json.loads(done.stderr.strip().splitlines()[-1])
    assert rc == 0, done.stderr
    assert "session " in done.stdout
    assert not [m for m in modules if m.startswith(("engine.store.jsonl.", "engine.store.memory"))
                or m in ("engine.store.jsonl", "engine.store.jsonl_lines")]
    assert "engine.store.door" not in modules
    assert "engine.store.blocks" in modules  # (the check above looked at its decoders)
    assert built == []


def test_the_console_script_runs_its_command_with_the_collector_on() -> None:
    """engine.launch holds the cyclic collector while the command loads; the command
    itself runs with it on, what loading made frozen (engine.startup_gc). A program
    calling engine.cli.main itself (as these tests do) is left as it was."""
    code = (
        "import gc, json, sys\n"
        "from engine.cli import tail\n"
        "seen = []\n"
        "def run(self, args):\n"
        "    seen.append([gc.isenabled(), gc.get_freeze_count() > 0])\n"
        "    return 0\n"
        "tail.TailCommand.run = run\n"
        "from engine import launch\n"
        "sys.argv = ['convlog', 'tail', 'sqlite:///:memory:']\n"
        "rc = launch.main()\n"
        "print(json.dumps([rc, seen, gc.isenabled()]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, timeout=120)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [0, [[True, True]], True], \
        done.stderr


def test_a_direct_call_of_the_cli_leaves_the_collector_alone() -> None:
    import gc  # noqa: PLC0415

    from engine.cli.app import main  # noqa: PLC0415

    frozen = gc.get_freeze_count()
    assert main(["--version"]) == 0
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen
