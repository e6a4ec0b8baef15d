"""Render WithParts messages as provider request formats (always provider-valid).

The sending rules (what OpenCode sends of a history) live once in
:mod:`projections.render.common`; each format module only spells them out.
"""
