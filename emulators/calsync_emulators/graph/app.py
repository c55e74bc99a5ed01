"""One "Exchange server" with two protocol front ends over one mailbox store: EWS and Graph, plus Entra.

``/EWS/Exchange.asmx`` is the EWS emulator (unchanged, sharing its store), ``/v1.0/`` the Graph front end,
``/{tenant}/oauth2/v2.0/token`` and ``/{tenant}/v2.0/.well-known/openid-configuration`` Entra (whose app-only
tokens EWS accepts as well). One fault-rule set covers all three.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, unquote

from calsync_emulators.ews.app import EwsEmulator, EwsFaultRule
from calsync_emulators.ews.directory import Directory
from calsync_emulators.faults import FaultRule
from calsync_emulators.graph.convert import graph_id, store_id
from calsync_emulators.graph.entra import Entra
from calsync_emulators.graph.errors import GraphError, graph_error
from calsync_emulators.graph.front import API_PREFIX, GraphFrontEnd, mailbox_of, operation_of, parse_mapping
from calsync_emulators.server import CONTROL_PREFIX, EmulatorApp, Request, Response

_TOKEN = re.compile(r"^/(?P<tenant>[^/]+)/oauth2/v2\.0/token$")
_DISCOVERY = re.compile(r"^/(?P<tenant>[^/]+)/v2\.0/\.well-known/openid-configuration$")


def _graph(request: Request) -> bool:
    return request.raw_path.startswith(API_PREFIX)


class ExchangeFaultRule(EwsFaultRule):
    """EWS rules as before; on Graph requests ``operation`` is ``events.create|list|get|update|delete`` and
    ``mailbox`` the ``/users/{mailbox}`` segment; ``reason`` is a Graph error code. On Entra, ``operation``
    is ``token``."""

    def matches(self, method: str, path: str, request: Any = None) -> bool:
        """Graph and Entra requests by their own operation and mailbox; EWS ones as EwsFaultRule does."""
        if isinstance(request, Request) and (_graph(request) or _TOKEN.match(request.path)):
            if not FaultRule.matches(self, method, path, request):
                return False
            graph = _graph(request)
            operation = operation_of(request) if graph else "token"
            mailbox = mailbox_of(request) if graph else None
            if self.operation is not None and self.operation != operation:
                return False
            return self.mailbox is None or (mailbox or "") == self.mailbox.lower()
        return super().matches(method, path, request)


class ExchangeServer(EmulatorApp):
    """EWS + Graph + Entra over one mailbox store (``calsync emulator exchange`` / ``graph``)."""

    rule_type = ExchangeFaultRule

    def __init__(self, directory: Directory | None = None) -> None:
        super().__init__()
        self.ews = EwsEmulator(directory)
        self.entra = Entra(self.ews.access, self.ews.lock)
        self.ews.access.bearer = self.entra.app_of
        self.graph = GraphFrontEnd(self.ews.store, self.ews.access, self.entra, self.ews.lock)

    def reset(self) -> None:
        """Forget items, tokens, policies and counters; restore the directory."""
        self.ews.reset()
        self.entra.reset()
        self.graph.reset()

    def handle(self, request: Request) -> Response:
        """Route to Entra, Graph or EWS."""
        if (token := _TOKEN.match(request.path)) and request.method == "POST":
            return self.entra.token(request, token["tenant"])
        if discovery := _DISCOVERY.match(request.path):
            return self.entra.discovery(request, discovery["tenant"])
        if _graph(request):
            return self.graph.handle(request)
        return self.ews.handle(request)

    def render_fault(self, rule: FaultRule, request: Request) -> Response:
        """Graph's error body on /v1.0/, else what the EWS emulator renders (OAuth JSON on the token path)."""
        if _graph(request):
            answer = graph_error(rule.status or 500, rule.reason, rule.message, rule.retry_after)
            answer.log.update(operation=operation_of(request), mailbox=mailbox_of(request))
            return answer
        return self.ews.render_fault(rule, request)

    def control(self, request: Request) -> Response | None:
        """``/_emulator/graph/…`` (package docstring), then the EWS emulator's routes (items, directory, …)."""
        route = request.raw_path[len(CONTROL_PREFIX) :].rstrip("/")
        if route.startswith("graph/"):
            try:
                rest = route[len("graph/") :]
                if (request.method, rest) == ("GET", "items"):
                    mailbox = request.query.get("mailbox", [None])[0]
                    items = self.ews.store.to_json(mailbox)
                    return Response.json(200, [{**i, "id": graph_id(i["id"]), "ews_id": i["id"]} for i in items])
                if rest.startswith("items/") and request.method in ("PATCH", "DELETE"):
                    return self._as_the_user(request, rest[len("items/") :])
                return self._graph_control(request.method, rest, parse_mapping(request))
            except (ValueError, KeyError, TypeError) as exc:
                return Response.json(400, {"error": f"bad control request: {exc}"})
        return self.ews.control(request)

    def _as_the_user(self, request: Request, event_id: str) -> Response:
        """The user edits or deletes an event (by Graph id) in Outlook: the EWS item routes, answered with Graph ids."""
        try:
            item_id = store_id(unquote(event_id))
        except GraphError:
            return Response.json(404, {"error": f"no item {event_id}"})
        raw_path = f"{CONTROL_PREFIX}items/{quote(item_id, safe='')}"
        answer = self.ews.control(dataclasses.replace(request, raw_path=raw_path))
        if answer is not None and answer.status == 200 and request.method == "PATCH":
            item = json.loads(answer.body)
            return Response.json(200, {**item, "id": graph_id(item["id"]), "ews_id": item["id"]})
        return answer if answer is not None else Response.json(404, {"error": "no such route"})

    def _graph_control(self, method: str, route: str, body: Mapping[str, Any]) -> Response | None:
        entra, graph = self.entra, self.graph
        if (method, route) == ("POST", "refresh-tokens"):
            return Response.json(201, {"refresh_token": entra.issue_refresh_token(body["client_id"], body["user"])})
        if (method, route) == ("POST", "revoke"):
            count = entra.revoke(user=body.get("user"), refresh_token=body.get("refresh_token"),
                                 code=int(body.get("code", 50173)))  # fmt: skip
            return Response.json(200, {"revoked": count})
        if (method, route) == ("POST", "secrets/expire"):
            entra.expire_secret(str(body["client_id"]))
            return Response.json(200, {"expired": body["client_id"]})
        if (method, route) == ("POST", "tokens/expire"):
            return Response.json(200, {"expired": entra.expire_all()})
        if (method, route) == ("PUT", "policy"):
            mailboxes = body.get("mailboxes")
            graph.set_policy(str(body["client_id"]), None if mailboxes is None else list(mailboxes))
            return Response.json(200, {"client_id": body["client_id"], "mailboxes": mailboxes})
        if (method, route) == ("PUT", "rest-disabled"):
            graph.set_rest_disabled(list(body.get("mailboxes") or []))
            return Response.json(200, {"mailboxes": sorted(graph.rest_disabled)})
        if (method, route) == ("GET", "concurrency"):
            return Response.json(200, graph.concurrency())
        if route == "config" and method in ("GET", "POST"):
            if method == "POST":
                if "token_lifetime" in body:
                    entra.token_lifetime = float(body["token_lifetime"])
                if "latency_ms" in body:
                    graph.latency_ms = int(body["latency_ms"])
                if "mailbox_concurrency" in body:
                    graph.mailbox_concurrency = int(body["mailbox_concurrency"])
            return Response.json(200, {"token_lifetime": entra.token_lifetime, "latency_ms": graph.latency_ms,
                                       "mailbox_concurrency": graph.mailbox_concurrency})  # fmt: skip
        return None


def create_app(directory: Mapping[str, Any] | Directory | None = None) -> ExchangeServer:
    """The Exchange server emulator (EWS + Graph + Entra), with the EWS emulator's default directory unless given."""
    if directory is not None and not isinstance(directory, Directory):
        directory = Directory.model_validate(directory)
    return ExchangeServer(directory)
