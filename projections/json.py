"""The converter for every view, with its unions tagged as the seed tags them.

Built on first use: configuring cattrs (its hooks for every view and tagged union)
is a large share of a read command's start, and ``convlog show`` renders text from
snapshot chunks without ever converting JSON (issue 30, target 3).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import cattrs


def _build() -> cattrs.Converter:
    from projections import views as v  # noqa: PLC0415 - on first use, see the module doc
    from projections.convert import make_converter, tag_union  # noqa: PLC0415

    conv = make_converter()
    tag_union(conv, v.MessageInfo, "role")
    tag_union(conv, v.ToolState, "status")
    tag_union(conv, v.FilePartSource, "type")
    tag_union(conv, v.Part, "type")
    return conv


class _OnFirstUse:
    """Stands for the converter until an attribute of it is read; each attribute read
    is then kept on this object, so later reads cost what a plain attribute does."""

    def __getattr__(self, name: str) -> Any:
        real = _real()
        value = getattr(real, name)
        setattr(self, name, value)
        return value


_built: list[cattrs.Converter] = []


def _real() -> cattrs.Converter:
    if not _built:
        _built.append(_build())
    return _built[0]


converter: cattrs.Converter = _OnFirstUse()  # type: ignore[assignment]


def to_json_obj(obj: Any) -> Any:
    return converter.unstructure(obj)


def from_json_obj(data: Any, cls: Any) -> Any:
    return converter.structure(data, cls)
