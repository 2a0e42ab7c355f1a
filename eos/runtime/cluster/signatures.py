"""Signed internal requests between workers (docs/cluster.md, "Internal requests").

Workers ask the leader for fencing rounds and hand it their connectors' task
configs over REST. Those requests carry an HMAC, made with the cluster's
*session key* (which the leader writes to the config topic and rotates every
``inter.worker.key.ttl.ms``), over::

    <METHOD>\\n<path>\\n<timestamp ms>\\n<body>

in three headers: :data:`SIGNATURE`, :data:`ALGORITHM` and :data:`TIMESTAMP`.
Signing the method and path as well as the body means a signed fence request
for one connector cannot be replayed against another (Kafka Connect signs the
body only, which a body-less request leaves empty); the timestamp means it
cannot be replayed later than ``inter.worker.signature.window.ms`` after it
was made.

The receiver answers: no signature headers → 400; an algorithm it does not
know → 400; no session key in the cluster yet → 503; a signature that does not
match the current key, or a timestamp outside the window → 403.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

SIGNATURE = "X-Eos-Signature"
ALGORITHM = "X-Eos-Signature-Algorithm"
TIMESTAMP = "X-Eos-Signature-Timestamp"

ALGORITHMS: Mapping[str, str] = {
    "HmacSHA256": "sha256",
    "HmacSHA384": "sha384",
    "HmacSHA512": "sha512",
}
"""Signature algorithms, by their Java names (as Kafka Connect names them)."""


@dataclass(frozen=True)
class Rejection:
    """Why a request's signature was not accepted, as an HTTP status and message."""

    status: int
    message: str


def _digest(key: bytes, algorithm: str, method: str, path: str, ts: int, body: bytes) -> bytes:
    message = f"{method.upper()}\n{path}\n{ts}\n".encode() + body
    return hmac.new(key, message, ALGORITHMS[algorithm]).digest()


def sign(
    key: bytes, algorithm: str, method: str, path: str, body: bytes, now_ms: int
) -> dict[str, str]:
    """The headers that sign this request."""
    digest = _digest(key, algorithm, method, path, now_ms, body)
    return {
        SIGNATURE: base64.b64encode(digest).decode("ascii"),
        ALGORITHM: algorithm,
        TIMESTAMP: str(now_ms),
    }


def verify(
    headers: Mapping[str, str],
    *,
    key: bytes | None,
    method: str,
    path: str,
    body: bytes,
    now_ms: int,
    window_ms: int,
) -> Rejection | None:
    """None if the request is signed with ``key`` within the window, else why not."""
    signature, algorithm, stamp = (headers.get(h) for h in (SIGNATURE, ALGORITHM, TIMESTAMP))
    if not signature or not algorithm or not stamp:
        return Rejection(
            400, f"internal request without its signature headers ({SIGNATURE}, {ALGORITHM}, "
            f"{TIMESTAMP}); only eos workers may call this endpoint"
        )  # fmt: skip
    if algorithm not in ALGORITHMS:
        known = ", ".join(ALGORITHMS)
        return Rejection(400, f"unknown signature algorithm {algorithm!r}; known: {known}")
    if key is None:
        return Rejection(503, "the cluster has no session key yet; retry in a moment")
    try:
        ts = int(stamp)
        claimed = base64.b64decode(signature, validate=True)
    except ValueError:
        return Rejection(403, "malformed request signature")
    if abs(now_ms - ts) > window_ms:
        return Rejection(
            403, f"request signature is stale: signed {abs(now_ms - ts)} ms away from now "
            f"(window {window_ms} ms)"
        )  # fmt: skip
    expected = _digest(key, algorithm, method, path, ts, body)
    if not hmac.compare_digest(expected, claimed):
        return Rejection(403, "request signature does not match the cluster's session key")
    return None


def key_bytes(algorithm: str) -> int:
    """Length of a new session key for ``algorithm`` (its digest size)."""
    return hashlib.new(ALGORITHMS[algorithm]).digest_size
