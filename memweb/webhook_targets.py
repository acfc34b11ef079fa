"""Where a webhook may post, and the one way it posts there.

A webhook's URL is chosen by whoever registers it, so without a check memweb would post, from inside
the network, to this machine (its own web server, its database port) or to private and cloud
metadata addresses, and report what answered. So a receiver's host must resolve only to public
addresses, unless MEMWEB_WEBHOOK_ALLOW_HOSTS names it (a host name, an address or a network).

The host is read by the system resolver, the same one a connection would use, so every spelling of
an address (2130706433, 0x7f000001, 0177.0.0.1, 127.1, [::ffff:127.0.0.1], a name) is checked as what
it means. It is checked when a webhook is registered and again at every delivery, and the delivery
connects to the very address it checked: a name that resolves elsewhere a moment later (DNS
rebinding) cannot move the request.

What a delivery records of the receiver is its status and a short, escaped excerpt of its answer.
Every failure to get an HTTP answer (refused, closed, timed out, TLS or non-HTTP talk) reads the
same, so the delivery log cannot be used to scan ports.
"""
import ipaddress
import socket
from urllib.parse import urlsplit

import certifi
import urllib3
from django.conf import settings

DEFAULT_PORTS = {"http": 80, "https": 443}
TIMEOUT_SECONDS = 5  # to connect, and then for each read
EXCERPT_CHARS = 80  # of a refusing receiver's answer, kept for the operator
NO_ANSWER = "no HTTP answer from the receiver (unreachable, timed out, or not speaking HTTP)"
ALLOW_SETTING = "MEMWEB_WEBHOOK_ALLOW_HOSTS"

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class TargetRefused(Exception):
    """The receiver's host may not be posted to; the message says why."""


class TargetUnresolved(TargetRefused):
    """The receiver's host resolves to nothing (now: a name may be registered before it exists)."""


def _kind(address: Address) -> str:
    """What makes `address` internal ("" when it is a public one)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    for kind in ("loopback", "unspecified", "link_local", "multicast", "reserved", "private"):
        if getattr(address, f"is_{kind}"):
            return kind.replace("_", "-")
    return "" if address.is_global else "non-public"


def _allowed(host: str, address: Address) -> bool:
    for entry in settings.MEMWEB_WEBHOOK_ALLOW_HOSTS:
        if entry == host.lower().rstrip("."):
            return True
        try:
            if address in ipaddress.ip_network(entry, strict=False):
                return True
        except ValueError:  # a host name, not a network
            continue
    return False


def _resolve(host: str, port: int) -> list[Address]:
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise TargetUnresolved(f"the host {host!r} does not resolve") from None
    return list(dict.fromkeys(ipaddress.ip_address(info[4][0].split("%")[0]) for info in found))


def target_address(host: str, port: int) -> Address:
    """The address to connect to for `host`: every address it resolves to must be public or allowed
    (a name answering one public and one internal address is refused)."""
    addresses = _resolve(host, port)
    for address in addresses:
        kind = _kind(address)
        if kind and not _allowed(host, address):
            raise TargetRefused(f"the host {host!r} is a {kind} address ({address}); memweb posts only to public "
                                f"addresses unless {ALLOW_SETTING} names the receiver")
    return addresses[0]


def target_port(url: str) -> int:
    parts = urlsplit(url)
    return parts.port or DEFAULT_PORTS[parts.scheme]


def _excerpt(response) -> str:
    text = response.read(EXCERPT_CHARS * 4, decode_content=False).decode("utf-8", "replace")[:EXCERPT_CHARS]
    return repr(text)[1:-1]  # control characters and quotes escaped; the pages escape HTML


def _pool(scheme: str, host: str, address: Address, port: int):
    timeout = urllib3.Timeout(connect=TIMEOUT_SECONDS, read=TIMEOUT_SECONDS)
    if scheme == "http":
        return urllib3.HTTPConnectionPool(str(address), port, timeout=timeout, retries=False)
    # The certificate is checked against the URL's host name, and sent as SNI, though we dial an address.
    return urllib3.HTTPSConnectionPool(str(address), port, timeout=timeout, retries=False, cert_reqs="CERT_REQUIRED",
                                       ca_certs=certifi.where(), server_hostname=host, assert_hostname=host)


def _host_header(host: str, port: int, scheme: str) -> str:
    shown = f"[{host}]" if ":" in host else host
    return shown if port == DEFAULT_PORTS[scheme] else f"{shown}:{port}"


def target_post(url: str, body: bytes, headers: dict) -> tuple[int | None, str]:
    """POST `body` to `url` (checked again now, connected to the checked address, no redirect
    followed): (status code, error), the error empty exactly when the receiver answered 2xx."""
    parts = urlsplit(url)
    port = target_port(url)
    try:
        address = target_address(parts.hostname, port)
    except TargetRefused as refused:
        return None, f"not sent: {refused}"
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    with _pool(parts.scheme, parts.hostname, address, port) as pool:
        try:
            response = pool.urlopen("POST", path, body=body, redirect=False, preload_content=False,
                                    headers={**headers, "Host": _host_header(parts.hostname, port, parts.scheme)})
        except (urllib3.exceptions.HTTPError, OSError):
            return None, NO_ANSWER
        try:
            return response.status, _refusal(response)
        except (urllib3.exceptions.HTTPError, OSError):
            return response.status, f"answered {response.status}"
        finally:
            response.release_conn()


def _refusal(response) -> str:
    if 200 <= response.status < 300:
        return ""
    if 300 <= response.status < 400 and response.headers.get("Location"):
        location = repr(response.headers["Location"][:EXCERPT_CHARS])[1:-1]
        return f"redirected to {location} (not followed)"
    return f"answered {response.status}: {_excerpt(response)}"
