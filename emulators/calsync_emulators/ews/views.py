"""What FindItem and GetItem return: the properties an ItemShape asks for, and Restriction filters.

Exchange semantics (documented) for the subset exchangelib sends: ``IdOnly``/``Default``/``AllProperties``
base shapes with AdditionalProperties, and And/Or/Not/Exists/IsEqualTo/IsNotEqualTo restrictions against a
constant. Our simplification: ``Default`` returns every stored field, like ``AllProperties``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from calsync_emulators.ews.mailbox import Item
from calsync_emulators.ews.soap import EwsError, T, local, prop_key, xml


@dataclass(frozen=True)
class Shape:
    """The properties to return: all of them, or the named fields and extended property keys."""

    everything: bool = False
    names: set[str] = field(default_factory=set)
    extended: set[str] = field(default_factory=set)


def shape_of(shape: ET.Element | None) -> Shape:
    """The Shape an ItemShape element asks for."""
    if shape is None:
        return Shape()
    everything = shape.findtext(f"{T}BaseShape") in ("AllProperties", "Default")
    names, extended = set(), set()
    for path in shape.findall(f"{T}AdditionalProperties/*"):
        if local(path.tag) == "ExtendedFieldURI":
            extended.add(prop_key(path))
        elif path.get("FieldURI"):
            names.add(path.get("FieldURI", "").split(":", 1)[-1])
    return Shape(everything, names, extended)


def render(item: Item, shape: Shape) -> str:
    """A CalendarItem element with the properties the shape asks for."""
    parts = [f'<t:ItemId Id="{item.id}" ChangeKey="{item.change_key}"/>']
    parts += [xml(e) for name, e in item.fields.items() if shape.everything or name in shape.names]
    parts += [xml(e) for key, e in item.extended.items() if shape.everything or key in shape.extended]
    return "<t:CalendarItem>" + "".join(parts) + "</t:CalendarItem>"


def _value_at(item: Item, path: ET.Element) -> str | None:
    if local(path.tag) == "ExtendedFieldURI":
        prop = item.extended.get(prop_key(path))
        return None if prop is None else prop.findtext(f"{T}Value")
    if local(path.tag) == "FieldURI":
        return item.text(path.get("FieldURI", "").split(":", 1)[-1])
    raise EwsError("ErrorUnsupportedPathForQuery", "The property path is not supported in a restriction.")


def property_lookup(expr: ET.Element) -> tuple[str, str] | None:
    """(extended property key, value) when only items carrying that value can match ``expr``, else None."""
    if local(expr.tag) != "IsEqualTo" or not len(expr) or local(expr[0].tag) != "ExtendedFieldURI":
        return None
    constant = expr.find(f"{T}FieldURIOrConstant/{T}Constant")
    value = None if constant is None else constant.get("Value")
    # Without a value the comparison also matches items lacking the property, which the index does not hold.
    return None if value is None else (prop_key(expr[0]), value)


def matches(item: Item, expr: ET.Element) -> bool:
    """Whether an item satisfies a restriction expression."""
    kind = local(expr.tag)
    if kind == "And":
        return all(matches(item, e) for e in expr)
    if kind == "Or":
        return any(matches(item, e) for e in expr)
    if kind == "Not":
        return not matches(item, expr[0])
    if kind == "Exists":
        return _value_at(item, expr[0]) is not None
    if kind in ("IsEqualTo", "IsNotEqualTo"):
        constant = expr.find(f"{T}FieldURIOrConstant/{T}Constant")
        if constant is None:
            raise EwsError("ErrorUnsupportedQueryFilter", "Only comparisons with a constant are supported.")
        equal = _value_at(item, expr[0]) == constant.get("Value")
        return equal if kind == "IsEqualTo" else not equal
    raise EwsError("ErrorUnsupportedQueryFilter", f"The restriction {kind} is not supported.")
