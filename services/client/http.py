"""Kafka Connect's REST API over httpx: one method per call, the decoded JSON body
back, and the errors a user sees when a call fails.

- :class:`Unreachable`: nothing answers at the URL (refused, unknown host, TLS
  handshake failed);
- :class:`RequestFailed`: the worker answered with an error status; its message is
  the ``message`` of Connect's error body (or the start of whatever else came back);
- :class:`ClientError`: any other failure (a timeout, a broken answer).

Path segments (connector and plugin names) are percent-encoded, so any name a
worker accepts can be addressed.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx

DEFAULT_URL = "http://127.0.0.1:8083"
DEFAULT_TIMEOUT = 90.0
"""Seconds a request may take (Kafka Connect's own REST timeout is 90 s)."""
_SNIPPET = 200
"""Characters of a non-JSON error body that are shown."""

Json = Any
"""A decoded JSON body: the shapes are Kafka Connect's (docs/cli.md)."""


class ClientError(Exception):
    """A request failed; the message says what happened, for the user."""


class Unreachable(ClientError):
    """No worker answers at the URL (connection refused, unknown host, TLS failure)."""


class RequestFailed(ClientError):
    """The worker answered with an HTTP error status (4xx, 5xx)."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message
        super().__init__(f"{message} (HTTP {status})")


def error_message(response: httpx.Response) -> str:
    """The ``message`` of Connect's error body, or the start of the body, or the reason."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("message"), str) and body["message"]:
        return str(body["message"])
    text = " ".join(response.text.split())
    if text:
        return text if len(text) <= _SNIPPET else text[:_SNIPPET] + "…"
    return response.reason_phrase or "no message"


def tls_context(
    cafile: str | None = None, certfile: str | None = None, keyfile: str | None = None
) -> ssl.SSLContext:
    """Trust ``cafile`` (else the system's CAs); present ``certfile`` (+ ``keyfile``)."""
    try:
        context = ssl.create_default_context(cafile=cafile)
        if certfile:
            context.load_cert_chain(certfile, keyfile)
    except (OSError, ssl.SSLError) as exc:
        raise ClientError(f"cannot load the TLS files ({exc})") from None
    return context


def segment(name: str) -> str:
    """``name`` as one path segment."""
    return quote(name, safe="")


class ConnectClient:
    """The REST API of the Kafka Connect (or eos) worker at ``url``."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        auth: tuple[str, str] | None = None,
        verify: ssl.SSLContext | bool = True,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = (url if "://" in url else f"http://{url}").rstrip("/")
        self.timeout = timeout
        self._authenticated = auth is not None
        self._http = httpx.Client(
            base_url=self.url,
            timeout=timeout,
            auth=auth,
            verify=verify,
            transport=transport,
            headers={"Accept": "application/json"},
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ConnectClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # ------------------------------------------------------------ transport

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str | list[str]] | None = None,
        body: Json = None,
    ) -> httpx.Response:
        """The answer to one request; an error status raises :class:`RequestFailed`."""
        try:
            response = self._http.request(method, path, params=params, json=body)
        except httpx.ConnectTimeout:
            raise Unreachable(self._nobody()) from None
        except httpx.TimeoutException:
            raise ClientError(
                f"the worker at {self.url} did not answer within {self.timeout:g} s (--timeout)"
            ) from None
        except httpx.ConnectError as exc:
            raise Unreachable(self._tls_problem(exc) or self._nobody()) from None
        except httpx.HTTPError as exc:
            reason = str(exc) or type(exc).__name__
            raise ClientError(f"{method} {self.url}{path} failed: {reason}") from None
        if response.status_code >= 400:
            raise RequestFailed(response.status_code, self._explained(response))
        return response

    def _nobody(self) -> str:
        return f"no eos worker answers at {self.url}: start one or pass --url"

    def _tls_problem(self, exc: BaseException) -> str | None:
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, ssl.SSLError):
            cause = cause.__cause__ or cause.__context__
        if cause is None and "SSL" not in str(exc):
            return None
        reason = getattr(cause, "reason", None) or str(cause or exc)
        if "CERTIFICATE_VERIFY_FAILED" in str(cause or exc):
            return (
                f"the worker at {self.url} presented a certificate this client does not "
                f"trust ({reason}): pass --cacert with the CA that signed it"
            )
        return f"TLS with the worker at {self.url} failed ({reason}): is it http:// or https://?"

    def _explained(self, response: httpx.Response) -> str:
        message = error_message(response)
        if response.status_code == 401 and not self._authenticated:
            message += " (pass --user, or set EOS_USER and EOS_PASSWORD)"
        return message

    def _json(self, response: httpx.Response) -> Json:
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise ClientError(
                f"{response.request.method} {response.request.url} answered "
                f"{response.status_code} with a body that is not JSON: "
                "is this a Kafka Connect worker?"
            ) from None

    def get(self, path: str, params: Mapping[str, str | list[str]] | None = None) -> Json:
        return self._json(self.request("GET", path, params=params))

    # ------------------------------------------------------------ the API

    def root(self) -> Json:
        """``GET /``: version, commit, kafka_cluster_id (eos adds ``cluster``)."""
        return self.get("/")

    def connector_names(self) -> list[str]:
        names = self.get("/connectors")
        return [str(n) for n in names] if isinstance(names, list) else []

    def connectors_expanded(self, *expand: str) -> dict[str, Json]:
        """``GET /connectors?expand=…``: name → ``{"status": …, "info": …}``."""
        body = self.get("/connectors", {"expand": list(expand)})
        return dict(body) if isinstance(body, dict) else {}

    def connector(self, name: str) -> Json:
        return self.get(f"/connectors/{segment(name)}")

    def config(self, name: str) -> Json:
        return self.get(f"/connectors/{segment(name)}/config")

    def tasks(self, name: str) -> Json:
        return self.get(f"/connectors/{segment(name)}/tasks")

    def status(self, name: str) -> Json:
        return self.get(f"/connectors/{segment(name)}/status")

    def create(self, name: str, config: Mapping[str, str], initial_state: str | None) -> Json:
        body: dict[str, Any] = {"name": name, "config": dict(config)}
        if initial_state:
            body["initial_state"] = initial_state
        return self._json(self.request("POST", "/connectors", body=body))

    def put_config(self, name: str, config: Mapping[str, str]) -> tuple[Json, bool]:
        """Create or update; also whether it was created (201) rather than updated."""
        response = self.request("PUT", f"/connectors/{segment(name)}/config", body=dict(config))
        return self._json(response), response.status_code == 201

    def delete(self, name: str) -> None:
        self.request("DELETE", f"/connectors/{segment(name)}")

    def pause(self, name: str) -> None:
        self.request("PUT", f"/connectors/{segment(name)}/pause")

    def resume(self, name: str) -> None:
        self.request("PUT", f"/connectors/{segment(name)}/resume")

    def stop(self, name: str) -> None:
        self.request("PUT", f"/connectors/{segment(name)}/stop")

    def restart(self, name: str, *, include_tasks: bool, only_failed: bool) -> Json:
        """The planned states (202) with either flag, else None (204)."""
        params = {"includeTasks": "true"} if include_tasks else {}
        if only_failed:
            params["onlyFailed"] = "true"
        path = f"/connectors/{segment(name)}/restart"
        return self._json(self.request("POST", path, params=params))

    def restart_task(self, name: str, task: int) -> None:
        self.request("POST", f"/connectors/{segment(name)}/tasks/{task}/restart")

    def offsets(self, name: str) -> Json:
        return self.get(f"/connectors/{segment(name)}/offsets")

    def alter_offsets(self, name: str, body: Json) -> str:
        path = f"/connectors/{segment(name)}/offsets"
        return self._message(self._json(self.request("PATCH", path, body=body)))

    def reset_offsets(self, name: str) -> str:
        path = f"/connectors/{segment(name)}/offsets"
        return self._message(self._json(self.request("DELETE", path)))

    def plugins(self, *, connectors_only: bool = True) -> list[Json]:
        params = {} if connectors_only else {"connectorsOnly": "false"}
        body = self.get("/connector-plugins", params)
        return list(body) if isinstance(body, list) else []

    def plugin_config(self, plugin: str) -> list[Json]:
        body = self.get(f"/connector-plugins/{segment(plugin)}/config")
        return list(body) if isinstance(body, list) else []

    def validate(self, plugin: str, config: Mapping[str, str]) -> Json:
        path = f"/connector-plugins/{segment(plugin)}/config/validate"
        return self._json(self.request("PUT", path, body=dict(config)))

    @staticmethod
    def _message(body: Json) -> str:
        if isinstance(body, dict) and isinstance(body.get("message"), str):
            return str(body["message"])
        return "done"
