"""``convlog proxy``: a recording reverse proxy for the model APIs agents call.

The client's traffic passes through unchanged (:mod:`.forward`); a copy of each
call goes to one recorder thread (:mod:`.recorder`) that writes it as convlog
events: the request as the call's context (:mod:`.calls`), the response through
the provider's stream ingest. Secrets never reach the recorder (:mod:`.secrets`).
"""
