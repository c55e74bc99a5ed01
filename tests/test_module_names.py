"""One name per concept: runtime modules share a file name only where docs/ARCHITECTURE.md's glossary says so."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = ("calsync", "core", "actors", "providers")


def test_every_shared_module_name_is_in_the_glossary() -> None:
    names = Counter(path.name for top in RUNTIME for path in (ROOT / top).rglob("*.py") if path.name != "__init__.py")
    shared = {name for name, count in names.items() if count > 1}
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    paragraph = text[text.index("Modules that share a file name") : text.index("## Folder map")]
    allowed = set(re.findall(r"`([a-z_]+\.py)`", paragraph))
    assert shared, "the scan found no modules"
    assert shared <= allowed, f"rename these, or say in the glossary why they share a name: {sorted(shared - allowed)}"
