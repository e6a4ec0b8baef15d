"""The conversations Q CLI saves by itself: ``data.sqlite3`` (``~/.local/share/amazon-q/`` on
Linux), table ``conversations(key, value)``, one ``ConversationState`` JSON per working
directory (the key), written on every turn so that ``q chat --resume`` finds it.

Only that table is read, read-only: the same database holds Q CLI's credentials
(``auth_kv``) and settings (``state``), which an import has no business reading. The key, a
path naming the user's home, is not kept either.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Final

from engine.importers.base import ImportInputError, ImportReport, Plan, loads, seal
from engine.importers.qcli import plan_conversation

DB_NAME: Final = "data.sqlite3"
_MAGIC: Final = b"SQLite format 3\x00"


def _tables(path: Path) -> set[str]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    finally:
        db.close()


def is_sqlite(path: Path) -> bool:
    """Whether ``path`` is a SQLite file (an unreadable one is not: reading it again names
    the error)."""
    try:
        with path.open("rb") as f:
            return f.read(len(_MAGIC)) == _MAGIC
    except OSError:
        return False


def is_qcli_db(path: Path) -> bool:
    """Whether ``path`` is a SQLite database with Q CLI's ``conversations`` table."""
    try:
        return is_sqlite(path) and "conversations" in _tables(path)
    except sqlite3.DatabaseError:
        return False


def plan_qcli_db(path: Path) -> Plan:
    """Every conversation of ``data.sqlite3`` (or of the directory holding it)."""
    db_path = path / DB_NAME if path.is_dir() else path
    if not is_qcli_db(db_path):
        raise ImportInputError(str(path), "no Q CLI data.sqlite3 with a conversations table")
    report = ImportReport(str(path), "qcli")
    try:
        db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        db.text_factory = bytes  # a row that is not UTF-8 is that row's error, not the table's
        try:
            rows = db.execute("SELECT rowid, value FROM conversations ORDER BY rowid").fetchall()
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        raise ImportInputError(str(path), f"the conversations table cannot be read ({exc})"
                               ) from exc
    sessions = []
    for rowid, value in rows:
        where = f"{db_path}: conversations row {rowid}"
        try:
            data = loads(value) if isinstance(value, str | bytes) else None
        except UnicodeDecodeError as exc:
            raise ImportInputError(where, f"not UTF-8 text ({exc.reason})") from exc
        except ValueError as exc:
            raise ImportInputError(where, f"invalid JSON ({exc})") from exc
        if not isinstance(data, dict) or "conversation_id" not in data:
            raise ImportInputError(where, "not a Q CLI conversation (no conversation_id)")
        sessions.append(plan_conversation(data, report, db_path.name, where))
    if not sessions:
        report.note("a data.sqlite3 without saved conversations: nothing to import")
    return seal(Plan(report, sessions))
