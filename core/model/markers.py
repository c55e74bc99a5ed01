"""The marker every Exchange item calsync writes carries: one MAPI named property, read by EWS and Graph alike.

A private named property (property set GUID + name, type String) holding ``target.sync_key``. EWS sees it as an
``ExtendedFieldURI``, Graph as the ``singleValueExtendedProperties`` id below, so an item created through one
protocol is found through the other (the EWS → Graph migration adopts items instead of duplicating them).
"""

from __future__ import annotations

SYNC_KEY_PROPERTY_SET = "dc272488-8779-40b1-ac57-3b20cbf587cf"
SYNC_KEY_PROPERTY_NAME = "CalsyncSyncKey"
#: Graph's id of the same property: ``String {GUID} Name NAME`` (the name part is matched case-sensitively).
GRAPH_SYNC_KEY_PROPERTY_ID = f"String {{{SYNC_KEY_PROPERTY_SET}}} Name {SYNC_KEY_PROPERTY_NAME}"
