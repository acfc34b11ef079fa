"""Serve memweb's memory as an MCP server, over stdio (an agent starts it) or streamable HTTP (docs/MCP.md)."""
import os

import anyio
from django.core.management import BaseCommand, CommandError
from mcp.server.transport_security import TransportSecuritySettings

from memweb.mcp.gateway import MemwebApi
from memweb.mcp.server import fixed_key, memory_server, request_credentials

KEY_VARIABLE = "MEMWEB_API_KEY"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


class Command(BaseCommand):
    help = ("Serve memory to MCP-capable agents: --stdio (the key from $MEMWEB_API_KEY) or --http (each request "
            "sends its key as 'Authorization: Bearer <key>'). Every call goes through memweb's JSON API.")

    def add_arguments(self, parser):
        transport = parser.add_mutually_exclusive_group(required=True)
        transport.add_argument("--stdio", action="store_true", help="speak MCP on stdin/stdout")
        transport.add_argument("--http", action="store_true", help="serve MCP's streamable HTTP transport")
        parser.add_argument("--host", default="127.0.0.1", help="--http: address to listen on (127.0.0.1)")
        parser.add_argument("--port", type=int, default=8765, help="--http: port (8765)")
        parser.add_argument("--path", default="/mcp", help="--http: the MCP endpoint's path (/mcp)")
        parser.add_argument("--allowed-host", action="append", default=[], metavar="HOST[:PORT]",
                            help="--http on a non-loopback address: a Host header to accept (repeatable; "
                                 "port '*' for any); guards against DNS rebinding")
        parser.add_argument("--api-url", default="",
                            help="a memweb served elsewhere (https://…); default: this checkout's API, in-process")

    def handle(self, *args, stdio, http, host, port, path, allowed_host, api_url, **options):
        if stdio:
            key = os.environ.get(KEY_VARIABLE, "").strip()
            if not key:
                raise CommandError(f"--stdio needs the agent's memweb API key in ${KEY_VARIABLE}")
            api = self._api(api_url)
            anyio.run(self._serve, api, memory_server(api, fixed_key(key)).run_stdio_async())
            return
        if host not in LOOPBACK and not allowed_host:
            raise CommandError(f"--host {host} is not a loopback address: name the Host headers to accept with "
                               "--allowed-host (e.g. --allowed-host memweb.example.com:*)")
        security = TransportSecuritySettings(allowed_hosts=allowed_host) if allowed_host else None
        api = self._api(api_url)
        self.stderr.write(f"memweb MCP server: streamable HTTP on http://{host}:{port}{path}")
        serving = memory_server(api, request_credentials).run_streamable_http_async(
            host=host, port=port, streamable_http_path=path, transport_security=security)
        anyio.run(self._serve, api, serving)

    @staticmethod
    def _api(api_url: str) -> MemwebApi:
        if not api_url:
            return MemwebApi.in_process()
        if not api_url.startswith(("https://", "http://")):
            raise CommandError(f"--api-url {api_url!r} is not an http(s) URL, e.g. https://memweb.example.com")
        return MemwebApi.remote(api_url)

    @staticmethod
    async def _serve(api: MemwebApi, serving) -> None:
        try:
            await serving
        finally:
            await api.aclose()
