"""The MCP server's only way into memweb: its JSON API, called with the caller's own API key.

Either in-process (Django's ASGI application, no network and no second server to run) or over HTTP to
a memweb elsewhere. Both go through the same routes, so authentication, scopes, workspaces, the
review gate, validation and limits are those of the API and nothing here repeats them.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx2 as httpx

API_PREFIX = "/api"
TIMEOUT_SECONDS = 60.0
LOOPBACK = "127.0.0.1"  # the caller of a stdio server: a process on this machine


class ApiRefused(Exception):
    """memweb answered with an error; `str()` is the message an agent reads."""

    def __init__(self, status: int, detail: str):
        self.status, self.detail = status, detail
        super().__init__(f"memweb refused the call ({status}): {detail}")


def bearer(key: str) -> dict[str, str]:
    """The credentials of one API key, as memweb's API reads them."""
    return {"Authorization": f"Bearer {key}"}


def path_segment(value: str) -> str:
    """A caller's value (a bank slug) as one path segment: it can never reach another route."""
    return quote(value, safe="")


def _detail(response: httpx.Response) -> str:
    """The API's `detail`, whichever of its shapes (a text, or a list of field problems) it has."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:500] or response.reason_phrase
    detail = body.get("detail", body) if isinstance(body, dict) else body
    if isinstance(detail, list):
        return "; ".join(_problem(item) for item in detail)
    return str(detail)


def _problem(item: Any) -> str:
    if not isinstance(item, dict):
        return str(item)
    where = ".".join(str(part) for part in item.get("loc", ()) if part not in ("body", "payload"))
    return f"{where}: {item.get('msg', '')}" if where else str(item.get("msg", item))


class MemwebApi:
    """Calls to memweb's JSON API, each with its caller's credentials (the headers that carry an API key,
    passed on for the API to read) and its caller's address.

    The address is the MCP caller's, so memweb's failure counting and logs see the agent rather than
    this server: in-process it is the request's own client address; to a remote memweb it travels
    as X-Forwarded-For, which memweb believes only when this server's address is among its
    MEMWEB_TRUSTED_PROXIES."""

    def __init__(self, *, base_url: str, app=None):
        self._base_url, self._app = base_url, app
        self._remote = None if app else httpx.AsyncClient(base_url=base_url, timeout=TIMEOUT_SECONDS)

    @classmethod
    def in_process(cls) -> MemwebApi:
        """This memweb's own API, through its ASGI application (Django must be set up)."""
        from django.conf import settings
        from django.core.asgi import get_asgi_application

        host = next((h for h in settings.ALLOWED_HOSTS if h and "*" not in h and not h.startswith(".")), "localhost")
        # https: a deployment that redirects plain HTTP (SECURE_SSL_REDIRECT) serves this call too.
        return cls(base_url=f"https://{host}", app=get_asgi_application())

    @classmethod
    def remote(cls, base_url: str) -> MemwebApi:
        """A memweb served at `base_url` (e.g. https://memweb.example.com)."""
        return cls(base_url=base_url.rstrip("/"))

    async def aclose(self) -> None:
        if self._remote is not None:
            await self._remote.aclose()

    async def call(self, method: str, path: str, *, credentials: Mapping[str, str], json: Any = None,
                   params: dict[str, Any] | None = None, client_address: str | None = None) -> Any:
        """The JSON answer of `method API_PREFIX+path`, or ApiRefused with the API's own message."""
        headers = dict(credentials)
        if self._remote is not None:
            if client_address:
                headers["X-Forwarded-For"] = client_address
            response = await self._remote.request(method, API_PREFIX + path, json=json, params=params, headers=headers)
        else:
            transport = httpx.ASGITransport(app=self._app, client=(client_address or LOOPBACK, 0))
            async with httpx.AsyncClient(transport=transport, base_url=self._base_url, timeout=TIMEOUT_SECONDS) as http:
                response = await http.request(method, API_PREFIX + path, json=json, params=params, headers=headers)
        if not response.is_success:
            raise ApiRefused(response.status_code, _detail(response))
        return response.json()
