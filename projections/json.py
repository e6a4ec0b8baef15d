"""The converter for every view, with its unions tagged as the seed tags them."""

from __future__ import annotations

from typing import Any

import cattrs

from projections import views as v
from projections.convert import make_converter, tag_union

converter: cattrs.Converter = make_converter()
tag_union(converter, v.MessageInfo, "role")
tag_union(converter, v.ToolState, "status")
tag_union(converter, v.FilePartSource, "type")
tag_union(converter, v.Part, "type")


def to_json_obj(obj: Any) -> Any:
    return converter.unstructure(obj)


def from_json_obj(data: Any, cls: Any) -> Any:
    return converter.structure(data, cls)
