"""Request bodies over ``CALSYNC_API_MAX_BODY_BYTES`` are refused with 413 before anything parses them."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from calsync.core.api.problems import ProblemError


class BodyLimit:
    """Reads the body up to the limit (answering 413 beyond it), then hands it on in one message."""

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        too_large = declared.isdigit() and int(declared) > self.max_bytes  # refused unread when it says so
        body = b""
        more = not too_large
        while more:
            message = await receive()
            body += message.get("body", b"")
            too_large = len(body) > self.max_bytes
            more = not too_large and message["type"] == "http.request" and message.get("more_body", False)
        if too_large:
            problem = ProblemError(413, "too-large", "Content Too Large", f"the body exceeds {self.max_bytes} bytes")
            await problem.response()(scope, receive, send)
            return
        messages = iter([{"type": "http.request", "body": body, "more_body": False}])

        async def replay() -> Message:
            return next(messages, None) or await receive()

        await self.app(scope, replay, send)
