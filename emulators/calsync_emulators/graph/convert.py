"""Graph ``event`` JSON ↔ the EWS store's calendar items, so both front ends show one mailbox.

Items are stored as EWS elements (mailbox.Item); a Graph write becomes those elements and a Graph read renders
them back. ``singleValueExtendedProperties`` ids ``String {GUID} Name X`` are the EWS named property
(PropertySetId GUID, PropertyName X, type String). Graph ids are immutable ids (never the EWS ItemId).
Our simplifications: times are stored as UTC instants; a time zone that is not an IANA name is read as
UTC; bodies keep their content type; only required attendees. Inferred: an all-day event reads as midnight of
its days in whatever zone is asked for (all-day events are floating in Outlook), never shifted to UTC.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import re
import xml.etree.ElementTree as ET
import zoneinfo
from collections.abc import Mapping
from typing import Any

from calsync_emulators.ews.mailbox import Item
from calsync_emulators.ews.soap import T, parse_time
from calsync_emulators.graph.errors import GraphError

_NAMED_ID = re.compile(r"^String \{(?P<guid>[0-9a-fA-F-]{36})\} Name (?P<name>.+)$")
_FORMAT = "%Y-%m-%dT%H:%M:%S.0000000"
_IMMUTABLE = b"immutable:"


def graph_id(item_id: str) -> str:
    """The Graph id of a store item: an immutable id (``Prefer: IdType="ImmutableId"``), unlike its EWS ItemId."""
    return base64.urlsafe_b64encode(_IMMUTABLE + item_id.encode()).decode()


def store_id(event_id: str) -> str:
    """The store item of a Graph id; an EWS ItemId or garbage answers 400 ErrorInvalidIdMalformed, as Graph does."""
    try:
        raw = base64.urlsafe_b64decode(event_id.encode())
    except (binascii.Error, ValueError):
        raw = b""
    if not raw.startswith(_IMMUTABLE):
        raise GraphError(400, "ErrorInvalidIdMalformed", "Id is malformed.")
    return raw[len(_IMMUTABLE) :].decode(errors="replace")


def property_key(graph_id: str) -> tuple[str, str]:
    """(store key, GUID as given) of a Graph named-property id; other id forms are refused."""
    match = _NAMED_ID.match(graph_id.strip())
    if match is None:
        raise GraphError(400, "ErrorInvalidExtendedPropertyValue", f"Unsupported extended property id {graph_id!r}.")
    return f"{match['guid'].lower()}/{match['name']}/String", match["guid"]


def _element(tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    elem = ET.Element(f"{T}{tag}", attrs)
    elem.text = text
    return elem


def _instant(value: Any, field: str) -> tuple[str, str]:
    if not isinstance(value, Mapping) or not isinstance(value.get("dateTime"), str):
        raise GraphError(400, "ErrorInvalidRequest", f"{field} must be a dateTimeTimeZone object.")
    zone_name = str(value.get("timeZone") or "UTC")
    try:
        local = dt.datetime.fromisoformat(value["dateTime"].replace("Z", ""))
    except ValueError:
        raise GraphError(400, "ErrorInvalidRequest", f"{field}.dateTime is not a date-time.") from None
    try:
        zone: dt.tzinfo = zoneinfo.ZoneInfo(zone_name) if zone_name.upper() != "UTC" else dt.UTC
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        zone = dt.UTC
    instant = (local if local.tzinfo else local.replace(tzinfo=zone)).astimezone(dt.UTC)
    return instant.strftime("%Y-%m-%dT%H:%M:%SZ"), zone_name


def apply(item: Item, body: Mapping[str, Any]) -> None:
    """Write the Graph fields present in ``body`` onto the item (a POST body or a PATCH)."""
    fields, extended = item.fields, item.extended
    if "subject" in body:
        fields["Subject"] = _element("Subject", str(body["subject"] or ""))
    if "body" in body:
        content = body["body"] or {}
        kind = "HTML" if str(content.get("contentType", "text")).lower() == "html" else "Text"
        fields["Body"] = _element("Body", str(content.get("content") or ""), BodyType=kind)
    if "location" in body:
        fields["Location"] = _element("Location", str((body["location"] or {}).get("displayName") or ""))
    for key, tag in (("start", "Start"), ("end", "End")):
        if key in body:
            text, zone = _instant(body[key], key)
            fields[tag] = _element(tag, text)
            fields[f"{tag}TimeZone"] = _element(f"{tag}TimeZone", Id=zone)
    if "isAllDay" in body:
        fields["IsAllDayEvent"] = _element("IsAllDayEvent", "true" if body["isAllDay"] else "false")
    if "attendees" in body:
        attendees = _element("RequiredAttendees")
        for attendee in body["attendees"] or ():
            address = str(((attendee or {}).get("emailAddress") or {}).get("address") or "")
            mailbox = ET.SubElement(ET.SubElement(attendees, f"{T}Attendee"), f"{T}Mailbox")
            ET.SubElement(mailbox, f"{T}EmailAddress").text = address
        if len(attendees):
            fields["RequiredAttendees"] = attendees
        else:
            fields.pop("RequiredAttendees", None)
    for prop in body.get("singleValueExtendedProperties") or ():
        key, guid = property_key(str(prop.get("id", "")))
        name = key.split("/")[1]
        elem = _element("ExtendedProperty")
        elem.append(_element("ExtendedFieldURI", PropertySetId=guid, PropertyName=name, PropertyType="String"))
        elem.append(_element("Value", str(prop.get("value", ""))))
        extended[key] = elem


def property_value(item: Item, key: str) -> str | None:
    """The value of one extended property, by store key."""
    prop = item.extended.get(key)
    return None if prop is None else prop.findtext(f"{T}Value")


def _properties(item: Item, wanted: str | None) -> list[dict[str, str]]:
    found = []
    for key, prop in item.extended.items():
        if wanted is not None and key != wanted:
            continue
        uri = prop.find(f"{T}ExtendedFieldURI")
        if uri is None or not uri.get("PropertyName") or not uri.get("PropertySetId"):
            continue
        graph_id = f"String {{{uri.get('PropertySetId')}}} Name {uri.get('PropertyName')}"
        found.append({"id": graph_id, "value": prop.findtext(f"{T}Value") or ""})
    return found


def etag_of(item: Item) -> str:
    """Graph's ``@odata.etag``: the ChangeKey, weak."""
    return f'W/"{item.change_key}"'


def _local_day(moment: dt.datetime, zone: ET.Element | None) -> dt.datetime:
    """Midnight of the day ``moment`` falls on where the event was written: in its IANA zone when it was stored as a
    UTC instant (a Graph write), else in the offset it was written with (an EWS write keeps it)."""
    try:
        tz: dt.tzinfo | None = zoneinfo.ZoneInfo(zone.get("Id", "")) if zone is not None else None
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        tz = None
    local = moment.astimezone(tz) if tz is not None and moment.utcoffset() == dt.timedelta(0) else moment
    return dt.datetime(local.year, local.month, local.day)


def render(item: Item, expand: str | None = None, *, with_properties: bool = False) -> dict[str, Any]:
    """The item as a Graph event; ``expand`` (a store key) adds that property, as ``$expand`` does."""

    all_day = item.text("IsAllDayEvent") in ("true", "1")

    def when(tag: str) -> dict[str, str] | None:
        text = item.text(tag)
        if not text:
            return None
        moment = parse_time(text)
        if all_day:  # floating: midnight of the day it is in its own zone, whatever zone is asked for
            return {"dateTime": _local_day(moment, item.fields.get(f"{tag}TimeZone")).strftime(_FORMAT),
                    "timeZone": "UTC"}  # fmt: skip
        return {"dateTime": moment.astimezone(dt.UTC).strftime(_FORMAT), "timeZone": "UTC"}

    body = item.fields.get("Body")
    event: dict[str, Any] = {
        "@odata.etag": etag_of(item),
        "id": graph_id(item.id),
        "changeKey": item.change_key,
        "subject": item.text("Subject"),
        "body": {"contentType": "html" if body is not None and body.get("BodyType") == "HTML" else "text",
                 "content": item.text("Body") or ""},
        "location": {"displayName": item.text("Location") or ""},
        "start": when("Start"),
        "end": when("End"),
        "isAllDay": all_day,
        "attendees": [{"type": "required", "status": {"response": "none", "time": "0001-01-01T00:00:00Z"},
                       "emailAddress": {"address": a, "name": a}} for a in item.attendees("RequiredAttendees")],
    }  # fmt: skip
    if item.transaction_id is not None:
        event["transactionId"] = item.transaction_id
    if expand is not None or with_properties:
        event["singleValueExtendedProperties"] = _properties(item, expand)
    return event
