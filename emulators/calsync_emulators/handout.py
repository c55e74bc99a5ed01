"""What ``calsync emulator`` hands out: credentials files for its test users, the environment to export and
the ``calsync accounts add`` commands that use them, so a first account takes one copy-paste."""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from calsync_emulators.control import GoogleControl, GraphControl
from calsync_emulators.ews.directory import DEFAULT_DIRECTORY

TENANT = "acme"  # a calsync tenant for the example commands; any name works
#: A new key only when none is set: a second handout pasted into the same shell keeps the key the first one's
#: accounts were encrypted with (a new one would stop the worker: it could decrypt none of them).
KEEP_OR_MAKE_KEY = '"${CALSYNC_SECRET_KEY:-$(calsync secret-key)}"'


@dataclass
class Handout:
    """Files written, variables to export, and example commands for one running emulator."""

    files: list[Path] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)
    commands: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The handout as the lines ``calsync emulator`` prints (after its "listening on" line)."""
        out = [f"  credentials file: {path}" for path in self.files]
        out += [f"  export {name}={shlex.quote(value)}" for name, value in self.environment.items()]
        out.append(f"  export CALSYNC_SECRET_KEY={KEEP_OR_MAKE_KEY}   # encrypts credentials: kept when set")
        out += [f"  {command}" for command in self.commands]
        return out + [f"  {note}" for note in self.notes]


def _write(path: Path, credentials: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump(credentials, handle, indent=2)
    return path


def _add(provider: str, address: str, path: Path, *options: str) -> str:
    extra = "".join(f" --option {shlex.quote(option)}" for option in options)
    return (f"calsync accounts add --tenant {TENANT} --provider {provider} --address {address} "
            f"--credentials-file {shlex.quote(str(path))}{extra} --verify")  # fmt: skip


def google_handout(url: str, directory: Path) -> Handout:
    """An authorized_user file whose token_uri is the emulator (any refresh token is accepted until revoked)."""
    control = GoogleControl(url)
    path = _write(directory / "google-credentials.json",
                  control.user_credentials("1//emulator-refresh-token", "calsync-client", "client-secret"))  # fmt: skip
    return Handout(
        files=[path],
        environment={"CALSYNC_GOOGLE_API_ENDPOINT": control.api_endpoint},
        commands=[_add("google", "alice@example.com", path)],
        notes=["every address is a calendar; the token endpoint is " + control.token_uri],
    )


def ews_handout(url: str, directory: Path) -> Handout:
    """A Basic login that may impersonate every mailbox, and app (OAuth2 client-credentials) credentials."""
    user, spec = next((name, spec) for name, spec in DEFAULT_DIRECTORY.users.items() if spec.impersonation)
    client, app = next(iter(DEFAULT_DIRECTORY.clients.items()))
    base = url.replace("https://", "http://", 1)  # EWS and its token endpoint over http (the Exchange server: both)
    server = f"server_url={base}/EWS/Exchange.asmx"
    basic = _write(directory / "ews-basic-credentials.json", {"username": user, "password": spec.password})
    oauth = _write(directory / "ews-oauth-credentials.json", {
        "client_id": client, "client_secret": app.secret, "tenant_id": app.tenant,
        "token_url": f"{base}/{app.tenant}/oauth2/v2.0/token"})  # fmt: skip
    others = ", ".join(name for name in DEFAULT_DIRECTORY.users if name != user)
    return Handout(
        files=[basic, oauth],
        environment={"OAUTHLIB_INSECURE_TRANSPORT": "1"},  # only for the OAuth2 file: its token URL is http
        commands=[
            _add("exchange", "alice@example.com", basic, server, "auth_type=basic", "access_type=impersonation"),
            # Another mailbox: one account per mailbox and tenant (a second one of alice's would be refused).
            _add("exchange", "bob@example.com", oauth, server, "auth_type=oauth2"),
        ],
        notes=[f"logins: {user} (impersonates every mailbox), {others} (own mailbox only)"],
    )


def graph_handout(url: str, directory: Path, ca_file: Path) -> Handout:
    """App-only Graph credentials with the emulator as authority, plus the EWS files (the same server)."""
    control = GraphControl(url)
    app = _write(directory / "graph-credentials.json", control.app_credentials())
    ews = ews_handout(url, directory)
    return Handout(
        files=[app, *ews.files],
        environment={
            "CALSYNC_GRAPH_API_ENDPOINT": control.api_endpoint,
            "CALSYNC_GRAPH_CA_FILE": str(ca_file),
            **ews.environment,
        },
        commands=[_add("graph", "carol@example.com", app), *ews.commands],
        notes=ews.notes,
    )
