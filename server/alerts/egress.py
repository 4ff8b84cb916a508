"""Where a webhook may send: public (global) addresses only, unless the operator allows more.

A webhook URL is chosen by an admin token, and the service would otherwise POST to anything it can reach: its own
loopback port, the cluster's private network, a cloud metadata address (169.254.169.254). :func:`pin` resolves the
URL's host, checks EVERY address it resolves to, and returns a request that connects to the checked address (the
Host header and the TLS server name stay the original host name, so certificates are still verified against it),
so a DNS answer that changes between the check and the connection cannot move the request elsewhere.

Allowed without a setting: global addresses (:func:`refusal` says why one is not, an IPv6 form that embeds an
IPv4 address included). ``SCALERL_WEBHOOK_ALLOW_PRIVATE=true`` allows every address (a receiver on the same machine
or network); ``SCALERL_WEBHOOK_ALLOWED_NETWORKS`` (a JSON list) allows only the host names and networks listed
(``["alerts.internal", "10.0.5.0/24", "127.0.0.1"]``).
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


def _table(rows: tuple[tuple[str, str], ...]) -> tuple[tuple[IPNetwork, str], ...]:
    return tuple((ipaddress.ip_network(net), what) for net, what in rows)


#: Networks that are not globally reachable (IANA's special-purpose registries), checked before ``is_global``:
#: on this project's Python 3.11.7, ``is_global`` is True for fec0::1, ::ffff:0:7f00:1, ::7f00:1, 64:ff9b:1::a00:1,
#: 3fff::1, 5f00::1 and 224.0.0.1, and later releases changed the IPv6 answers again; this table does not depend on
#: the interpreter. A few IANA-global addresses inside these blocks (192.0.0.9, 2001:1::1, 2001:3::/32 ...) are
#: refused too: no webhook receiver lives there.
_NOT_GLOBAL = _table(
    (
        ("0.0.0.0/8", "'this network'"),
        ("10.0.0.0/8", "private"),
        ("100.64.0.0/10", "shared address space (carrier-grade NAT)"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local (cloud metadata)"),
        ("172.16.0.0/12", "private"),
        ("192.0.0.0/24", "IETF protocol assignments"),
        ("192.0.2.0/24", "documentation"),
        ("192.88.99.0/24", "6to4 relay anycast (deprecated)"),
        ("192.168.0.0/16", "private"),
        ("198.18.0.0/15", "benchmarking"),
        ("198.51.100.0/24", "documentation"),
        ("203.0.113.0/24", "documentation"),
        ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved, with the broadcast address 255.255.255.255"),
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("::/96", "IPv4-compatible (deprecated)"),
        ("::ffff:0:0/96", "IPv4-mapped"),
        ("::ffff:0:0:0/96", "IPv4-translated"),
        ("64:ff9b:1::/48", "local-use NAT64 prefix"),
        ("100::/64", "discard-only"),
        ("2001::/23", "IETF protocol assignments (Teredo 2001::/32 included)"),
        ("2001:db8::/32", "documentation"),
        ("3fff::/20", "documentation"),
        ("5f00::/16", "segment routing (SRv6) identifiers"),
        ("fc00::/7", "unique-local"),
        ("fe80::/10", "link-local"),
        ("fec0::/10", "site-local (deprecated)"),
        ("ff00::/8", "multicast"),
    )
)

#: IPv6 prefixes that carry an IPv4 address in their last 32 bits: NAT64 (RFC 6052's well-known prefix and RFC
#: 8215's local-use one), IPv4-translated (``::ffff:0:a.b.c.d``, RFC 2765) and IPv4-compatible (``::a.b.c.d``).
_EMBEDS_IPV4_LOW32 = (
    ipaddress.IPv6Network("64:ff9b::/96"),
    ipaddress.IPv6Network("64:ff9b:1::/48"),
    ipaddress.IPv6Network("::ffff:0:0:0/96"),
    ipaddress.IPv6Network("::/96"),
)


def embedded_ipv4(addr: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address reaches through a translation or tunnel: IPv4-mapped (``::ffff:a.b.c.d``),
    IPv4-translated (``::ffff:0:a.b.c.d``), 6to4 (``2002:AABB:CCDD::``), Teredo (server and client), NAT64 and
    IPv4-compatible (last 32 bits)."""
    out = [a for a in (addr.ipv4_mapped, addr.sixtofour) if a is not None]
    if addr.teredo is not None:
        out += list(addr.teredo)
    if any(addr in net for net in _EMBEDS_IPV4_LOW32) and int(addr) > 1:  # ``::`` and ``::1`` are IPv6's own
        out.append(ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF))
    return out


def refusal(addr: IPAddress) -> str | None:
    """Why a webhook may not reach ``addr`` (None: it may). Invariant: an address is accepted only if it lies in no
    network of the non-global table, every IPv4 address it embeds is accepted too, and Python calls it global and not
    multicast; so ``[64:ff9b::7f00:1]``, ``[2002:7f00:1::]`` and ``[::ffff:0:7f00:1]`` (all 127.0.0.1) are refused."""
    for net, what in _NOT_GLOBAL:
        if net.version == addr.version and addr in net:
            return f"{what}: {net}"
    if isinstance(addr, ipaddress.IPv6Address):
        for inner in embedded_ipv4(addr):
            why = refusal(inner)
            if why is not None:
                return f"it reaches {inner}, {why}"
    if addr.is_multicast or not addr.is_global:
        return "not global"
    return None


def public(addr: IPAddress) -> bool:
    """A webhook may reach ``addr`` without a setting (:func:`refusal` has no objection)."""
    return refusal(addr) is None


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
        why = refusal(addr)
        if why is not None and not any(addr in net for net in nets if net.version == addr.version):
            raise Refused(
                f"{host} resolves to {addr}, a non-public address ({why}); "
                "set SCALERL_WEBHOOK_ALLOW_PRIVATE=true or list it in SCALERL_WEBHOOK_ALLOWED_NETWORKS to allow it"
            )
    addr = addresses[0]
    netloc_host = f"[{addr}]" if addr.version == 6 else str(addr)
    netloc = f"{netloc_host}:{parts.port}" if parts.port else netloc_host
    host_header = parts.netloc.rsplit("@", 1)[-1]
    extensions = {"sni_hostname": host} if parts.scheme == "https" else {}
    pinned = urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
    return Pinned(pinned, {"Host": host_header}, extensions)
