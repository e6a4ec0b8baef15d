"""Read-side integrations: a session as a framework's memory or message list.

Each module imports its framework; this package itself imports none.
"""
