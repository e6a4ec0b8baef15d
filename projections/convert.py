"""JSON for views, via cattrs: the seed's field names (sessionID, callID, ...) and no nulls.

One rule names every field, whatever declares it: the read side's attrs views
and the events' msgspec value types that the views reuse (``Tokens``,
``ModelRef``, ``MessageError``, sources, ...). snake_case becomes camelCase and
the words in :data:`WORD_SPELLING` keep their capitals (``session_id`` ->
``sessionID``); :data:`RENAMES` holds the fields that no rule names. Optional
fields (default ``None``) are omitted when ``None``, as TypeScript's optional
fields are absent; a field that merely has a default (cost 0, agent "") is
always written, as the seed requires.

Unions are tagged by the class's own declaration: a ``TAG`` / ``TAG_FIELD``
class variable on a view, msgspec's ``tag`` / ``tag_field`` on an event value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import attrs
import cattrs
import msgspec
from cattrs.fns import identity
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override
from cattrs.strategies import configure_tagged_union

# Words spelled in capitals inside a camelCase name (the seed writes sessionID, not sessionId).
WORD_SPELLING: Final[dict[str, str]] = {"id": "ID"}
# Fields whose JSON name no rule gives (none today: add one here, not in a converter).
RENAMES: Final[dict[str, str]] = {}


def seed_name(field: str) -> str:
    """The seed's spelling of a snake_case field name."""
    if field in RENAMES:
        return RENAMES[field]
    head, *rest = field.split("_")
    return head + "".join(WORD_SPELLING.get(w, w.capitalize()) for w in rest)


def tag_of(cl: type) -> tuple[str, str] | None:
    """``(tag field, tag)`` as the class declares it, or None for an untagged class."""
    if isinstance(cl, type) and issubclass(cl, msgspec.Struct):
        config = cl.__struct_config__
        if config.tag is None or config.tag_field is None:
            return None
        return config.tag_field, str(config.tag)
    tag = getattr(cl, "TAG", None)
    return None if tag is None else (getattr(cl, "TAG_FIELD", "type"), tag)


def _is_struct(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, msgspec.Struct)


def _struct_unstructure(conv: cattrs.Converter, cl: type) -> Callable[[Any], dict[str, Any]]:
    """An event value type's JSON: the fields that are always written first, then the
    optional ones that are set (the order cattrs gives the attrs views).

    Compiled on first use into straight-line code, as cattrs compiles its attrs hooks
    (snapshots unstructure every view); first use, because a union a field needs may
    be tagged after this factory runs.
    """
    compiled: list[Callable[[Any], dict[str, Any]]] = []

    def unstructure(obj: Any) -> dict[str, Any]:
        if not compiled:
            compiled.append(_compile_unstructure(conv, cl))
        return compiled[0](obj)

    return unstructure


def _compile_unstructure(conv: cattrs.Converter, cl: type) -> Callable[[Any], dict[str, Any]]:
    scope: dict[str, Any] = {}

    def read(i: int, name: str, t: Any) -> str:
        hook = conv.get_unstructure_hook(t)
        if hook is identity:
            return f"obj.{name}"
        scope[f"h{i}"] = hook
        return f"h{i}(obj.{name})"

    fields = msgspec.structs.fields(cl)
    tag = tag_of(cl)
    always = [f"{tag[0]!r}: {tag[1]!r}"] if tag is not None else []
    always += [f"{seed_name(f.name)!r}: {read(i, f.name, f.type)}"
               for i, f in enumerate(fields) if f.default is not None]
    lines = ["def unstructure(obj):", f"    out = {{{', '.join(always)}}}"]
    for i, f in enumerate(fields):
        if f.default is None:
            lines += [f"    if obj.{f.name} is not None:",
                      f"        out[{seed_name(f.name)!r}] = {read(i, f.name, f.type)}"]
    lines.append("    return out")
    exec("\n".join(lines), scope)  # the source holds field names and repr()s only
    fn: Callable[[Any], dict[str, Any]] = scope["unstructure"]
    return fn


def _struct_structure(conv: cattrs.Converter, cl: type) -> Callable[[Any, Any], Any]:
    fields = msgspec.structs.fields(cl)
    plan: list[tuple[str, str, Any, Callable[[Any, Any], Any]]] = []

    def structure(data: Any, _: Any) -> Any:
        if not plan and fields:
            plan.extend((f.name, seed_name(f.name), f.type, conv.get_structure_hook(f.type))
                        for f in fields)
        return cl(**{name: hook(data[key], t) for name, key, t, hook in plan if key in data})

    return structure


def make_converter() -> cattrs.Converter:
    conv = cattrs.Converter(omit_if_default=True)

    def unstructure_factory(cl: type) -> Any:
        overrides: dict[str, Any] = {
            a.name: override(rename=seed_name(a.name), omit_if_default=a.default is None)
            for a in attrs.fields(cl)
        }
        fn: Any = make_dict_unstructure_fn(cl, conv, _cattrs_omit_if_default=True, **overrides)
        tag = tag_of(cl)
        if tag is None:
            return fn
        tag_field, tag_value = tag

        def tagged(obj: Any) -> dict[str, Any]:
            # A tagged view always says what it is, even outside a union.
            return {tag_field: tag_value, **fn(obj)}

        return tagged

    def structure_factory(cl: type) -> Any:
        overrides: dict[str, Any] = {
            a.name: override(rename=seed_name(a.name)) for a in attrs.fields(cl)
        }
        return make_dict_structure_fn(cl, conv, **overrides)

    conv.register_unstructure_hook_factory(attrs.has, unstructure_factory)
    conv.register_structure_hook_factory(attrs.has, structure_factory)
    conv.register_unstructure_hook_factory(_is_struct, lambda cl: _struct_unstructure(conv, cl))
    conv.register_structure_hook_factory(_is_struct, lambda cl: _struct_structure(conv, cl))
    return conv


def tag_union(conv: cattrs.Converter, union: Any, tag_name: str) -> None:
    """Tag a union by its members' own tags (see :func:`tag_of`)."""
    def tag(cl: type) -> str:
        found = tag_of(cl)
        assert found is not None, cl
        assert found[0] == tag_name, (cl, found, tag_name)
        return found[1]

    configure_tagged_union(union, conv, tag_name=tag_name, tag_generator=tag)
    # ``union | None`` too: cattrs tells optional attrs classes apart by their fields,
    # but not msgspec values, so an optional tagged union is read by its tag as well.
    structure = conv.get_structure_hook(union)
    unstructure = conv.get_unstructure_hook(union)
    conv.register_structure_hook_func(
        lambda t: t == union | None,
        lambda data, _: None if data is None else structure(data, union))
    conv.register_unstructure_hook_func(
        lambda t: t == union | None,
        lambda obj: None if obj is None else unstructure(obj))


__all__ = ["make_converter", "seed_name", "tag_of", "tag_union"]
