"""``calsync demo``: the README's first command."""

from __future__ import annotations

import click

from calsync.actors.cli.common import CliState, pass_state, stdout
from calsync.actors.demo import run_demo


@click.command("demo")
@pass_state
def demo(state: CliState) -> None:
    """Run the scripted demo on embedded defaults (fresh data in DATA_DIR/demo)."""
    code = run_demo(state.settings, stdout)
    if code:
        raise SystemExit(code)
