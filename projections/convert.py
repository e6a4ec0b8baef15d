"""JSON for views, via cattrs: the seed's field names (sessionID, callID, ...) and no nulls.

Views use snake_case attributes; this converter renames them on the way out and
back, omits optional fields left at None (TypeScript's optional fields), and
tags unions by a ``TAG`` class variable (``type`` for parts, ``status`` for tool
states, ``role`` for message info).
"""

from __future__ import annotations

from typing import Any, Union, get_args

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override
from cattrs.strategies import configure_tagged_union

_SPECIAL = {
    "session_id": "sessionID",
    "message_id": "messageID",
    "call_id": "callID",
    "provider_id": "providerID",
    "model_id": "modelID",
    "parent_id": "parentID",
    "client_name": "clientName",
}


def seed_name(field: str) -> str:
    """The seed's spelling of a snake_case attribute."""
    if field in _SPECIAL:
        return _SPECIAL[field]
    head, *rest = field.split("_")
    return head + "".join(w.capitalize() for w in rest)


def make_converter() -> cattrs.Converter:
    conv = cattrs.Converter(omit_if_default=True)

    def unstructure_factory(cl: type) -> Any:
        # Only optional fields (default None) are omitted; a required field that
        # merely has a default (cost 0, tokens.reasoning 0, agent "") is always
        # written, as the seed requires (BR-13).
        overrides: dict[str, Any] = {
            a.name: override(rename=seed_name(a.name), omit_if_default=a.default is None)
            for a in attrs.fields(cl)
        }
        fn: Any = make_dict_unstructure_fn(cl, conv, _cattrs_omit_if_default=True, **overrides)
        tag = getattr(cl, "TAG", None)
        if tag is None:
            return fn
        tag_field = getattr(cl, "TAG_FIELD", "type")

        def tagged(obj: Any) -> dict[str, Any]:
            # A tagged view always says what it is, even outside a union.
            return {tag_field: tag, **fn(obj)}

        return tagged

    def structure_factory(cl: type) -> Any:
        overrides: dict[str, Any] = {
            a.name: override(rename=seed_name(a.name)) for a in attrs.fields(cl)
        }
        return make_dict_structure_fn(cl, conv, **overrides)

    conv.register_unstructure_hook_factory(attrs.has, unstructure_factory)
    conv.register_structure_hook_factory(attrs.has, structure_factory)
    return conv


def tag_union(conv: cattrs.Converter, union: Any, tag_name: str) -> None:
    """Tag a union of view classes by their ``TAG`` class variable."""
    configure_tagged_union(
        union, conv, tag_name=tag_name, tag_generator=lambda cl: str(getattr(cl, "TAG")),  # noqa: B009
    )


def union_of(*classes: type) -> Any:
    return Union[classes]  # noqa: UP007 - built at run time from a tuple


__all__ = ["get_args", "make_converter", "seed_name", "tag_union", "union_of"]
