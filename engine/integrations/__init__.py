"""Recording wrappers for the SDKs agents are built with (write side).

Each module imports its SDK; this package itself imports none, so ``import
engine`` never pulls one in. :mod:`.recording` is the SDK-neutral core: it
feeds a live stream's events to a :class:`~engine.adapters.ingest.StreamIngest`
while handing them on unchanged, and settles the message however the stream
ends.
"""
