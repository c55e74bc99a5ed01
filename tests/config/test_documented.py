"""The README's settings table is complete: every CALSYNC_* variable the code reads has a row."""

from __future__ import annotations

import re
from pathlib import Path

from calsync.core.config.settings import setting_names

README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_setting_has_a_row_in_the_readme_table() -> None:
    text = README.read_text()
    section = text[text.index("## Configuration") :]
    section = section[: section.index("\n## ", 1)]
    rows = {
        name
        for line in section.splitlines()
        if line.startswith("| `")
        for name in re.findall(r"`(CALSYNC_\w+)`", line.split("|")[1])
    }
    assert sorted(set(setting_names()) - rows) == []
    assert sorted(rows - set(setting_names())) == []
