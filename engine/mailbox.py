"""The mailbox deciders: projects, agents, assignments, session tokens, deliveries.

Agents of one project send each other messages (the seed ``agent-send-message``).
Every project of a store shares one mailbox log, so "this agent does not exist"
(``agent_not_found``, 404) and "this agent is in another project"
(``target_agent_not_in_project``, 403) are both decided from the log alone, as
the seed's two repositories decide them.

A message is **one** ``mail.sent`` event with one delivery state per receiver:
``sent -> delivered -> read``. The seed's dual write (one line in each agent's
file) can tear; one event cannot. Five entity declarations, each a table, its
rules and its evolve, are composed by :class:`MailboxLife`, which mutates only
through the journal it is given (a rejected batch rolls back whole).
"""

from __future__ import annotations

from typing import Any, ClassVar, Final

import attrs

from engine import events as ev
from engine.decider import ABSENT, EntityGroup, Journal, KeyedEntity, Row, Table
from engine.errors import PartValidationError
from engine.events import Event, tag_of
from engine.mailbox_credentials import well_formed
from engine.mailbox_graphemes import grapheme_count

MAX_CONTENT: Final = 4000  # characters as Swift counts them (grapheme clusters)

# The seed's error codes with their HTTP statuses, plus the ones it leaves implicit
# (authentication, unknown project, a reused client message id), as data.
ERRORS: Final[dict[str, tuple[int, str]]] = {
    "invalid_session_token": (401, "the session token is unknown, expired or revoked"),
    "invalid_credentials": (401, "the agent does not exist or the passkey is wrong"),
    "content_too_long": (400, f"content is longer than {MAX_CONTENT} characters"),
    "cannot_message_self": (400, "an agent cannot send a message to itself"),
    "agent_not_found": (404, "no agent has this id"),
    "target_agent_not_in_project": (403, "the target agent is not assigned to the project"),
    "working_directory_not_set": (500, "the project has no working directory"),
    "project_not_found": (404, "no project has this id"),
    "sender_not_in_project": (403, "the sender is not assigned to the project"),
    "message_not_found": (404, "no message with this id was sent to this agent"),
    "client_message_id_reused": (409, "a client message id was reused for another message"),
    "invalid_request": (400, "a required field is missing or malformed"),
    "credential_required": (401, "the agent has no credential; set one before it can "
                                 "authenticate here"),
    "internal_error": (500, "the server could not complete the call; nothing was written"),
}


MAX_PAGE: Final = 1000  # messages per listing page, at every door


def check_limit(limit: object) -> int:
    """A listing's ``limit``, the same at every door (MCP, HTTP, Python): an integer
    from 1 to :data:`MAX_PAGE`. Anything else is refused, never clamped or sliced
    (``[:-1]`` would silently drop the last message)."""
    if type(limit) is not int or not 1 <= limit <= MAX_PAGE:
        raise MailboxError("invalid_request",
                           f"limit must be an integer from 1 to {MAX_PAGE}, not {limit!r}")
    return limit


def check_cursor(after: object) -> int:
    """A listing's ``after`` cursor: an integer, 0 (the beginning) or more."""
    if type(after) is not int or after < 0:
        raise MailboxError("invalid_request", f"after must be an integer >= 0, not {after!r}")
    return after


class MailboxError(PartValidationError):
    """A refused mailbox command or event: ``code`` is the seed's error code and
    ``status`` its HTTP status (see :data:`ERRORS`). Nothing was written."""

    def __init__(self, code: str, message: str, *, event_id: str = "",
                 event_type: str = "") -> None:
        super().__init__(code, message, event_id=event_id, event_type=event_type)
        self.code = code
        self.status = ERRORS[code][0]
        self.detail = message


def _fail(e: Event, code: str, text: str) -> MailboxError:
    return MailboxError(code, text, event_id=e.id, event_type=tag_of(type(e)))


@attrs.frozen
class MailboxEntity(KeyedEntity["MailboxLife"]):
    """A mailbox entity; ``locate`` finds its state and the event that entered it."""


def _blank(e: Event, **fields: str) -> None:
    for name, value in fields.items():
        if not value.strip():
            raise _fail(e, "invalid_request", f"{name} must not be blank")


# --------------------------------------------------------------------------- project


def _project(m: MailboxLife, e: Any) -> tuple[str, Event | None]:
    created = m.projects.get(e.project_id)
    return (ABSENT, None) if created is None else ("created", created)


def _project_created(m: MailboxLife, e: ev.ProjectCreated) -> None:
    _blank(e, project_id=e.project_id)


def _add_project(j: Journal, m: MailboxLife, e: ev.ProjectCreated, _: Row) -> None:
    j.put(m.projects, e.project_id, e)
    j.put(m.directories, e.project_id, e.working_directory)
    j.put(m.members, e.project_id, {})


def _set_directory(j: Journal, m: MailboxLife, e: ev.ProjectDirectorySet, _: Row) -> None:
    j.put(m.directories, e.project_id, e.working_directory)


def _set_team_config(j: Journal, m: MailboxLife, e: ev.ProjectTeamConfigSet, _: Row) -> None:
    j.put(m.team_configs, e.project_id, e.config)


PROJECT: Final = MailboxEntity(
    Table("project", "A project, one entity per project id. Its working directory may be "
          "empty at creation and set later.", [
              Row(ABSENT, ev.ProjectCreated, "created", note="project id not blank"),
              Row("created", ev.ProjectDirectorySet, "created"),
              Row("created", ev.ProjectTeamConfigSet, "created",
                  note="an Agent Teams config.json, kept verbatim"),
          ]),
    rules={ev.ProjectCreated: _project_created},
    evolve={ev.ProjectCreated: _add_project, ev.ProjectDirectorySet: _set_directory,
            ev.ProjectTeamConfigSet: _set_team_config},
    locate=_project,
)

# --------------------------------------------------------------------------- agent


def _agent(m: MailboxLife, e: Any) -> tuple[str, Event | None]:
    registered = m.agents.get(e.agent_id)
    return (ABSENT, None) if registered is None else ("registered", registered)


def _agent_registered(m: MailboxLife, e: ev.AgentRegistered) -> None:
    _blank(e, agent_id=e.agent_id)
    if e.passkey_hash is not None:
        _verifier(e, e.passkey_hash)


def _verifier(e: Event, verifier: str) -> None:
    if not well_formed(verifier):
        raise _fail(e, "invalid_request",
                    "passkey_hash must be a scrypt verifier (engine.mailbox_credentials)")


def _credential_set(m: MailboxLife, e: ev.AgentCredentialSet) -> None:
    _verifier(e, e.passkey_hash)


def _add_agent(j: Journal, m: MailboxLife, e: ev.AgentRegistered, _: Row) -> None:
    j.put(m.agents, e.agent_id, e)
    j.put(m.credentials, e.agent_id, e.passkey_hash)


def _set_credential(j: Journal, m: MailboxLife, e: ev.AgentCredentialSet, _: Row) -> None:
    j.put(m.credentials, e.agent_id, e.passkey_hash)


AGENT: Final = MailboxEntity(
    Table("agent", "An agent, one entity per agent id, known to every project of the "
          "store (so an unknown id and an id of another project are told apart).", [
              Row(ABSENT, ev.AgentRegistered, "registered",
                  note="agent id not blank; a credential, if any, is a scrypt verifier"),
              Row("registered", ev.AgentCredentialSet, "registered",
                  note="a scrypt verifier; replaces the one before"),
          ]),
    rules={ev.AgentRegistered: _agent_registered, ev.AgentCredentialSet: _credential_set},
    evolve={ev.AgentRegistered: _add_agent, ev.AgentCredentialSet: _set_credential},
    locate=_agent,
)

# --------------------------------------------------------------------------- assignment


def _assignment(m: MailboxLife, e: Any) -> tuple[str, Event | None]:
    return m.assignments.get((e.project_id, e.agent_id), (ABSENT, None))


def _assignable(m: MailboxLife, e: ev.AgentAssigned | ev.AgentUnassigned) -> None:
    if e.project_id not in m.projects:
        raise _fail(e, "project_not_found", f"no project {e.project_id!r}")
    if e.agent_id not in m.agents:
        raise _fail(e, "agent_not_found", f"no agent {e.agent_id!r}")


def _move_assignment(j: Journal, m: MailboxLife, e: ev.AgentAssigned | ev.AgentUnassigned,
                     row: Row) -> None:
    j.put(m.assignments, (e.project_id, e.agent_id), (row.target, e))
    members = m.members[e.project_id]
    if row.target == "assigned":
        j.put(members, e.agent_id, None)
    else:
        j.pop(members, e.agent_id)


ASSIGNMENT: Final = MailboxEntity(
    Table("assignment", "An agent's membership of a project, one entity per (project, "
          "agent); both must exist. Only assigned agents send and receive.", [
              Row(ABSENT, ev.AgentAssigned, "assigned"),
              Row("assigned", ev.AgentUnassigned, "unassigned",
                  note="the agent's tokens for the project stop working"),
              Row("unassigned", ev.AgentAssigned, "assigned"),
          ]),
    rules={ev.AgentAssigned: _assignable, ev.AgentUnassigned: _assignable},
    evolve={ev.AgentAssigned: _move_assignment, ev.AgentUnassigned: _move_assignment},
    locate=_assignment,
)

# --------------------------------------------------------------------------- token


def _token(m: MailboxLife, e: Any) -> tuple[str, Event | None]:
    return m.tokens.get(e.token_hash, (ABSENT, None))


def _token_issued(m: MailboxLife, e: ev.TokenIssued) -> None:
    if len(e.token_hash) != 64:
        raise _fail(e, "invalid_request", "token_hash must be a SHA-256 hex digest")
    if not m.assigned(e.project_id, e.agent_id):
        raise _fail(e, "sender_not_in_project",
                    f"agent {e.agent_id!r} is not assigned to project {e.project_id!r}")


def _issue(j: Journal, m: MailboxLife, e: ev.TokenIssued, row: Row) -> None:
    j.put(m.tokens, e.token_hash, (row.target, e))
    j.put(m.issued, e.token_hash, e)


def _revoke(j: Journal, m: MailboxLife, e: ev.TokenRevoked, row: Row) -> None:
    j.put(m.tokens, e.token_hash, (row.target, e))


TOKEN: Final = MailboxEntity(
    Table("token", "A session token bound to (agent, project), one entity per token hash "
          "(the token itself is never logged). An active token also stops working when it "
          "expires (`expires_at`, judged against the clock by the command) or when its "
          "agent leaves the project.", [
              Row(ABSENT, ev.TokenIssued, "active", note="its agent is in its project"),
              Row("active", ev.TokenRevoked, "revoked"),
          ]),
    rules={ev.TokenIssued: _token_issued},
    evolve={ev.TokenIssued: _issue, ev.TokenRevoked: _revoke},
    locate=_token,
)

# --------------------------------------------------------------------------- delivery


def _delivery(m: MailboxLife, e: Any) -> tuple[str, Event | None]:
    if isinstance(e, ev.MailSent):
        sent = m.messages.get(e.message_id)
        return (ABSENT, None) if sent is None else ("sent", sent)
    return m.deliveries.get((e.message_id, e.agent_id), (ABSENT, None))


def _mail_sent(m: MailboxLife, e: ev.MailSent) -> None:
    """The seed's checks, in the seed's order (after the sender's own standing)."""
    _blank(e, message_id=e.message_id, sender_id=e.sender_id)
    if e.project_id not in m.projects:
        raise _fail(e, "project_not_found", f"no project {e.project_id!r}")
    if not m.assigned(e.project_id, e.sender_id):
        raise _fail(e, "sender_not_in_project",
                    f"agent {e.sender_id!r} is not assigned to project {e.project_id!r}")
    if not e.receivers or len(set(e.receivers)) != len(e.receivers):
        raise _fail(e, "invalid_request", "receivers must be given, each once")
    length = grapheme_count(e.content)
    if length > MAX_CONTENT:
        raise _fail(e, "content_too_long",
                    f"content has {length} characters; at most {MAX_CONTENT} are allowed")
    if e.sender_id in e.receivers:
        raise _fail(e, "cannot_message_self", "an agent cannot send a message to itself")
    for receiver in e.receivers:
        if receiver not in m.agents:
            raise _fail(e, "agent_not_found", f"no agent {receiver!r}")
    for receiver in e.receivers:
        if not m.assigned(e.project_id, receiver):
            raise _fail(e, "target_agent_not_in_project",
                        f"agent {receiver!r} is not assigned to project {e.project_id!r}")
    if not m.directories[e.project_id].strip():
        raise _fail(e, "working_directory_not_set",
                    f"project {e.project_id!r} has no working directory")
    if e.reply_to is not None:
        answered = m.messages.get(e.reply_to)
        if (answered is None or answered.project_id != e.project_id
                or e.sender_id not in answered.receivers):
            raise _fail(e, "message_not_found",
                        f"{e.reply_to!r} is not a message to {e.sender_id!r} in this project")


def _receipt(m: MailboxLife, e: ev.MailDelivered | ev.MailRead) -> None:
    sent = m.messages.get(e.message_id)
    if sent is None or e.agent_id not in sent.receivers:
        raise _fail(e, "message_not_found",
                    f"no message {e.message_id!r} was sent to {e.agent_id!r}")


def _send(j: Journal, m: MailboxLife, e: ev.MailSent, row: Row) -> None:
    j.put(m.messages, e.message_id, e)
    for receiver in e.receivers:
        j.put(m.deliveries, (e.message_id, receiver), ("sent", e))


def _move_delivery(j: Journal, m: MailboxLife, e: ev.MailDelivered | ev.MailRead,
                   row: Row) -> None:
    j.put(m.deliveries, (e.message_id, e.agent_id), (row.target, e))


DELIVERY: Final = MailboxEntity(
    Table("delivery", "One message to one receiver, one entity per (message, receiver): "
          "`mail.sent` creates one per receiver in a single event. `get_pending_messages` "
          "delivers; marking read or answering with `respond_chat` reads. The rules of "
          "`mail.sent` are the seed's checks, in its order.", [
              Row(ABSENT, ev.MailSent, "sent",
                  note="content_too_long, cannot_message_self, agent_not_found, "
                       "target_agent_not_in_project, working_directory_not_set"),
              Row("sent", ev.MailDelivered, "delivered", note="get_pending_messages"),
              Row("delivered", ev.MailRead, "read", note="mark_read or respond_chat"),
              Row("sent", ev.MailRead, "read", note="read before it was fetched"),
          ]),
    rules={ev.MailSent: _mail_sent, ev.MailDelivered: _receipt, ev.MailRead: _receipt},
    evolve={ev.MailSent: _send, ev.MailDelivered: _move_delivery,
            ev.MailRead: _move_delivery},
    locate=_delivery,
)

ENTITIES: Final[tuple[MailboxEntity, ...]] = (PROJECT, AGENT, ASSIGNMENT, TOKEN, DELIVERY)
ENTITY_OF: Final[dict[type[Event], MailboxEntity]] = {
    cls: entity for entity in ENTITIES for cls in entity.table.events
}

# --------------------------------------------------------------------------- composition


class MailboxLife(EntityGroup):
    """Every mailbox entity of a log: enough state to judge the next event."""

    __slots__ = ("agents", "assignments", "credentials", "deliveries", "directories",
                 "issued", "members", "messages", "projects", "team_configs", "tokens")
    ENTITY_OF: ClassVar[dict[type[Event], MailboxEntity]] = ENTITY_OF

    def __init__(self, session_id: str, journal: Journal) -> None:
        super().__init__(session_id, journal)
        self.projects: dict[str, Event] = {}
        self.directories: dict[str, str] = {}
        self.team_configs: dict[str, dict[str, Any]] = {}  # project -> its Agent Teams config
        self.members: dict[str, dict[str, None]] = {}  # project -> its assigned agents
        self.agents: dict[str, ev.AgentRegistered] = {}
        self.credentials: dict[str, str | None] = {}  # agent -> its verifier, if any
        self.assignments: dict[tuple[str, str], tuple[str, Event]] = {}
        self.tokens: dict[str, tuple[str, Event]] = {}  # hash -> (state, entered by)
        self.issued: dict[str, ev.TokenIssued] = {}
        self.messages: dict[str, ev.MailSent] = {}
        self.deliveries: dict[tuple[str, str], tuple[str, Event]] = {}

    def assigned(self, project_id: str, agent_id: str) -> bool:
        return agent_id in self.members.get(project_id, ())
