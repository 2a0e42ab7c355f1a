"""Request bodies larger than ``rest.max.request.bytes`` are refused with 413 before
anything parses them: at once from the ``Content-Length`` header, and for a body
sent without one (chunked) as soon as the bytes read pass the limit. The body is
read here, within the limit, and handed to the route as it came."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.rest.errors import error


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None:
            try:
                length = int(declared)
            except ValueError:
                await error(400, "Content-Length is not a number")(scope, receive, send)
                return
            if length > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # http.disconnect, when it comes

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        answer = error(
            413,
            f"Request body is larger than {self.max_bytes} bytes (rest.max.request.bytes)",
        )
        answer.headers["Connection"] = "close"
        await answer(scope, receive, send)
