"""Request bodies over ``CALSYNC_API_MAX_BODY_BYTES`` are refused with 413 before anything parses them."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from calsync.core.api.problems import ProblemError


def _too_large(limit: int) -> ProblemError:
    return ProblemError(413, "too-large", "Content Too Large", f"the body exceeds {limit} bytes")


class BodyLimit:
    """Reads the body up to the limit (answering 413 beyond it), then hands it on in one message."""

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await _too_large(self.max_bytes).response()(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await _too_large(self.max_bytes).response()(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
