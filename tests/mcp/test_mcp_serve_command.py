"""`manage.py mcp_serve` refuses, before serving anything, what would leave it unsafe or keyless."""
import pytest
from django.core.management import CommandError, call_command


def test_stdio_without_a_key_names_the_variable(monkeypatch):
    monkeypatch.delenv("MEMWEB_API_KEY", raising=False)
    with pytest.raises(CommandError, match=r"\$MEMWEB_API_KEY"):
        call_command("mcp_serve", "--stdio")


def test_http_on_a_public_address_needs_the_host_names_to_accept():
    with pytest.raises(CommandError, match="--allowed-host"):
        call_command("mcp_serve", "--http", "--host", "0.0.0.0")


def test_it_needs_exactly_one_transport():
    with pytest.raises(CommandError, match="--stdio --http|one of the arguments"):
        call_command("mcp_serve")


def test_a_remote_memweb_is_named_by_its_url(monkeypatch):
    monkeypatch.setenv("MEMWEB_API_KEY", "mw_anything")
    with pytest.raises(CommandError, match="not an http"):
        call_command("mcp_serve", "--stdio", "--api-url", "memweb.example.com")
