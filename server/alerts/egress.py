"""Where a webhook may send: public (global) addresses only, unless the operator allows more.

A webhook URL is chosen by an admin token, and the service would otherwise POST to anything it can reach: its own
loopback port, the cluster's private network, a cloud metadata address (169.254.169.254). :func:`pin` resolves the
URL's host, checks EVERY address it resolves to, and returns a request that connects to the checked address (the
Host header and the TLS server name stay the original host name, so certificates are still verified against it),
so a DNS answer that changes between the check and the connection cannot move the request elsewhere.

Allowed without a setting: addresses that are ``is_global`` and not multicast. ``SCALERL_WEBHOOK_ALLOW_PRIVATE=true``
allows every address (a receiver on the same machine or network); ``SCALERL_WEBHOOK_ALLOWED_NETWORKS`` (a JSON list)
allows only the host names and networks listed (``["alerts.internal", "10.0.5.0/24", "127.0.0.1"]``).
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class Refused(Exception):
    """The URL's host is (or resolves to) an address webhooks may not reach."""


@dataclass(frozen=True)
class Pinned:
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    extensions: dict[str, str] = field(default_factory=dict)


def _networks(entries: tuple[str, ...] | list[str]) -> tuple[set[str], list[IPNetwork]]:
    hosts: set[str] = set()
    nets: list[IPNetwork] = []
    for entry in entries:
        text = entry.strip().lower()
        if not text:
            continue
        try:
            nets.append(ipaddress.ip_network(text, strict=False))
        except ValueError:
            hosts.add(text.rstrip("."))
    return hosts, nets


#: IPv6 prefixes that carry an IPv4 address in their last 32 bits: NAT64 (RFC 6052's well-known prefix and RFC
#: 8215's local-use one) and IPv4-compatible addresses (``::a.b.c.d``, deprecated but still routed by some stacks).
_EMBEDS_IPV4_LOW32 = (
    ipaddress.IPv6Network("64:ff9b::/96"),
    ipaddress.IPv6Network("64:ff9b:1::/48"),
    ipaddress.IPv6Network("::/96"),
)


def embedded_ipv4(addr: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address reaches through a translation or tunnel: IPv4-mapped (``::ffff:a.b.c.d``),
    6to4 (``2002:AABB:CCDD::``), Teredo (server and client), NAT64 and IPv4-compatible (last 32 bits)."""
    out = [a for a in (addr.ipv4_mapped, addr.sixtofour) if a is not None]
    if addr.teredo is not None:
        out += list(addr.teredo)
    if any(addr in net for net in _EMBEDS_IPV4_LOW32) and int(addr) > 1:  # ``::`` and ``::1`` are IPv6's own
        out.append(ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF))
    return out


def public(addr: IPAddress) -> bool:
    """A global, non-multicast address; an IPv6 address that embeds an IPv4 one is public only if that one is too
    (``[64:ff9b::7f00:1]``, ``[2002:7f00:1::]`` and ``[::127.0.0.1]`` all reach 127.0.0.1)."""
    if isinstance(addr, ipaddress.IPv6Address):
        inner = embedded_ipv4(addr)
        if inner:
            return all(public(a) for a in inner)
    return addr.is_global and not addr.is_multicast


def resolve(host: str, port: int) -> list[IPAddress]:
    try:
        return [ipaddress.ip_address(host)]  # an address literal: no lookup
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise Refused(f"cannot resolve {host!r}: {exc}") from None
    out: list[IPAddress] = []
    for info in infos:
        addr = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if addr not in out:
            out.append(addr)
    if not out:
        raise Refused(f"cannot resolve {host!r}")
    return out


def pin(url: str, allow_private: bool = False, allowed: tuple[str, ...] | list[str] = ()) -> Pinned:
    """The request to send for ``url`` (see the module doc); raises :class:`Refused` (never ValueError, even for a
    malformed URL: one bad webhook must not stop the deliveries of the others)."""
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises on a port that is not a number in 0..65535
    except ValueError as exc:  # e.g. a URL stored before the API checked ports and IPv6 literals
        raise Refused(f"not a valid URL: {exc}") from None
    host = (parts.hostname or "").rstrip(".").lower()
    if parts.scheme not in ("http", "https") or not host:
        raise Refused("only http(s) URLs with a host are allowed")
    if allow_private:
        return Pinned(url)
    hosts, nets = _networks(allowed)
    if host in hosts:
        return Pinned(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    addresses = resolve(host, port)
    for addr in addresses:
        if not public(addr) and not any(addr in net for net in nets if net.version == addr.version):
            raise Refused(
                f"{host} resolves to {addr}, a loopback, private, link-local or otherwise non-public address; "
                "set SCALERL_WEBHOOK_ALLOW_PRIVATE=true or list it in SCALERL_WEBHOOK_ALLOWED_NETWORKS to allow it"
            )
    addr = addresses[0]
    netloc_host = f"[{addr}]" if addr.version == 6 else str(addr)
    netloc = f"{netloc_host}:{parts.port}" if parts.port else netloc_host
    host_header = parts.netloc.rsplit("@", 1)[-1]
    extensions = {"sni_hostname": host} if parts.scheme == "https" else {}
    pinned = urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
    return Pinned(pinned, {"Host": host_header}, extensions)
