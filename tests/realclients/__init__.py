"""The real agent CLIs against a scripted model on 127.0.0.1 (docs/real-clients.md).

``server`` is the scripted model (four wire formats, every request and event
logged), ``generate`` runs each CLI through the script and checks its transcripts
in under ``tests/fixtures/real-cli/``, the ``test_*`` modules import those
fixtures with convlog's importers and hold them against the server's log.
"""
