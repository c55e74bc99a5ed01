"""``python -m calsync_emulators ...``: the calsync CLI with this distribution's commands, installed or not.

For running from a source tree without installing the distribution (its entry points then do not exist),
e.g. the emulator services of docker-compose.yml, which mount ``emulators/`` into the calsync image.
"""

from __future__ import annotations

from calsync.actors.cli.main import cli
from calsync_emulators.cli import demo, emulator

if __name__ == "__main__":
    cli.add_command(demo)
    cli.add_command(emulator)
    cli(prog_name="calsync")
