"""The exit codes of ``convlog``, defined once: the commands return them, the error
handler maps exceptions onto them and ``docs/cli.md`` is generated from this table."""

from __future__ import annotations

from typing import NamedTuple


class ExitCode(NamedTuple):
    # A NamedTuple, not attrs: `convlog --help` imports this module and must start fast.
    code: int
    name: str
    meaning: str


OK = ExitCode(0, "ok", "success (for `verify`: the log is sound)")
INTERNAL = ExitCode(1, "internal", "a bug in convlog: one line names it; `-v` shows the "
                                   "traceback (please report it)")
USAGE = ExitCode(2, "usage", "bad arguments or option values, a store URL that cannot be "
                             "opened (also a store a newer release wrote: its schema or "
                             "format is newer), no such store, a malformed or unknown "
                             "`--session`")
REJECTED = ExitCode(3, "rejected", "an event was invalid, illegal or conflicts with a stored "
                                   "one (nothing was appended), or another convlog error")
CORRUPT = ExitCode(4, "corrupt", "the log is damaged or tampered with (`verify` names the "
                                 "first bad seq); also any read that meets damaged data")
UNREADABLE = ExitCode(5, "unreadable", "the store's files cannot be read as a store at all "
                                       "(not a database, unreadable format file)")
KEY_NEEDED = ExitCode(6, "key-needed", "the store is keyed (HMAC chain) and `--key-file` was "
                                       "not given: nothing can be said about tampering")
BUSY = ExitCode(7, "busy", "another writer held the store's write lock longer than the "
                           "wait (30 s; e.g. a long batched window or a bulk import): "
                           "nothing was written, try again")
INTERRUPTED = ExitCode(130, "interrupted", "Ctrl-C: stopped with one line; nothing is "
                                           "half-written (a batch is all or nothing)")
PIPE_CLOSED = ExitCode(141, "pipe-closed", "the reader of the output went away (e.g. "
                                           "`| head -1`): stopped quietly, like other Unix tools")

EXIT_CODES: tuple[ExitCode, ...] = (OK, INTERNAL, USAGE, REJECTED, CORRUPT, UNREADABLE,
                                    KEY_NEEDED, BUSY, INTERRUPTED, PIPE_CLOSED)
