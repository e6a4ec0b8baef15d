"""``convlog replay``: recorded model calls served back as the provider APIs.

:mod:`.catalog` reads the recorded calls of a store (the proxy's contexts and
their answers), :mod:`.streams` renders an answer as the provider's stream (one
stream event per recorded event), :mod:`.app` matches each request to a call
by its conversation and answers with it, or with a 404 naming the nearest call
and where the request diverged from it.
"""
