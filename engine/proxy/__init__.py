"""``convlog proxy``: a recording reverse proxy for the model APIs agents call.

The client's traffic passes through unchanged (:mod:`.forward`); a copy of each
call goes to the recorder (:mod:`.recorder`, run in a child process by
:mod:`.process`) that writes it as convlog events: the request as the call's
context (:mod:`.context`), the response through the provider's stream ingest.
Calls are grouped into sessions by the client's headers or their conversation
(:mod:`.conversation`). Secrets never reach the recorder (:mod:`.secrets`).
"""
