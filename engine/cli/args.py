"""Argument types shared by the commands: values are checked by the parser, before
any work is done, and a bad one is a usage error (exit 2) in every command."""

from __future__ import annotations

import argparse
import math
import os
import stat
from collections.abc import Callable
from typing import TypeVar

from engine.errors import InvalidId

N = TypeVar("N", int, float)


def session_id(value: str) -> str:
    """A well-formed session id (the one rule for ``--session``: malformed or unknown
    is a usage error, exit 2, in every command)."""
    from engine.store.base import check_id  # noqa: PLC0415 - parsers are built at every start

    try:
        check_id("session", value)
    except InvalidId as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def new_session_id(value: str) -> str:
    """A session id ``append`` may create: a UUID (always a well-formed id)."""
    from engine.ids import is_uuid  # noqa: PLC0415 - uuid and random load at first use

    if not is_uuid(value):
        raise argparse.ArgumentTypeError(f"{value[:80]!r} is not a UUID (append creates "
                                         "sessions with UUID ids)")
    return value


def positive_int(value: str) -> int:
    n = _int(value)
    if n < 1:
        raise argparse.ArgumentTypeError(f"{value!r} must be at least 1")
    return n


def natural(value: str) -> int:
    n = _int(value)
    if n < 0:
        raise argparse.ArgumentTypeError(f"{value!r} must be 0 or more")
    return n


def seconds(value: str) -> float:
    x = _number(value, float, "a number")
    if not math.isfinite(x) or x <= 0:
        raise argparse.ArgumentTypeError(f"{value!r} must be a positive number of seconds")
    return x


def _int(value: str) -> int:
    n = _number(value, int, "an integer")
    if abs(n) >= 1 << 63:
        raise argparse.ArgumentTypeError(f"{value!r} is out of range")
    return n


def _number(value: str, convert: Callable[[str], N], what: str) -> N:
    """``convert(value)``, or a usage error saying what ``value`` is not."""
    try:
        return convert(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not {what}") from None


STORE_HELP = ("store URL (sqlite:///relative.db, sqlite:////abs.db, jsonl:///dir, "
              "postgresql://user@host/db) or a bare path: a directory is a JSONL store, "
              "anything else a SQLite file")


def store_url(given: str) -> str:
    """A store URL as given, or a bare path as the URL it names: an existing directory
    is a JSONL store, anything else a SQLite file (``convlog verify convlog-demo.db``).
    Read commands still open with ``create=False``, so a mistyped path is "no such
    store", never a new empty one."""
    if "://" in given:
        return given
    # Absolute, so messages name the file itself: the URL slash rule (three slashes
    # relative, four absolute) is no business of someone who typed a path.
    place = os.path.abspath(given)
    try:
        is_dir = stat.S_ISDIR(os.stat(given).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        is_dir = False
    except OSError as exc:  # a name too long for the file system, ...
        raise argparse.ArgumentTypeError(f"{given[:80]!r}...: {exc.strerror}") from None
    return f"jsonl:///{place}" if is_dir else f"sqlite:///{place}"


def add_store(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("store", type=store_url, help=STORE_HELP)


def add_key_file(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--key-file", metavar="FILE", help="the secret of a keyed (HMAC) store")
