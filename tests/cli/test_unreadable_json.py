"""A change file that is JSON the parser refuses (a number of more than 4300 digits) is bad input in one line,
as HTTP answers it with a documented 400 (tests/api/test_media_types.py), never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.process import calsync, one_line_error


def test_a_number_too_long_to_parse_is_one_line_of_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "change.json"
    path.write_text(json.dumps({"operation": "upsert", "n": 0}).replace("0", "7" * 5000))
    line = one_line_error(
        calsync("submit", "--tenant", "t", "--file", str(path), env={"CALSYNC_DATA_DIR": str(tmp_path)}), 2
    )
    assert f"change file {path} cannot be read as JSON" in line and "5000 digits" in line, line
    assert "set_int_max_str_digits" not in line
