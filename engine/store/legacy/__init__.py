"""Readers of the layouts earlier releases wrote, kept in one room.

Today's readers and writers (``engine.store.packed``, ``blocks``, ``jsonl_blocks``,
``sqlite``, ``postgres``, ``jsonl``) handle exactly one current layout each. When
one of them meets an older layout's mark (a format byte, an index version, a schema
number) it hands the bytes or the database here, and nowhere else:

- ``packed_v1``: packed payloads of format 1 (bare strings among the bodies), msgpack
  and JSON, upcast to today's columns;
- ``blocks_v2``: SQLite/PostgreSQL sealed blocks of kind ``0x01`` (a zlib'd block
  that keeps per-event hashes), read and verified as they were written;
- ``jsonl_index_v1``: JSONL gzip members of index version 1 (no block link);
- ``jsonl_format``: raising a JSONL store's ``convlog.json`` to today's format;
- ``sqlite_schema``: SQLite schemas 2 and 3 (read as they are, migrated by the first
  write or ``convlog migrate``);
- ``postgres_schema``: PostgreSQL schema 2 -> 3.

Nothing here is imported at start-up: the current readers import a module of this
package only when they meet its layout. The fixtures of every old layout are in
``tests/fixtures`` (``packed-v1*``, ``store-v1``, ``store-v2.db``, ``jsonl-v1*``,
``jsonl-v2``, ``pg-store-v2.sql``) with the scripts that made them.
"""
