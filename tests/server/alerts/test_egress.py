"""Which addresses a webhook may reach (server.alerts.egress), without a network: every non-global form is refused,
as a URL literal and as a name's DNS answer; global addresses (and their 6to4/NAT64 forms) are allowed."""

from __future__ import annotations

import ipaddress
import re
import socket
from typing import Any

import pytest

from server.alerts.egress import Refused, pin, public


def fake_dns(monkeypatch: pytest.MonkeyPatch, answers: dict[str, list[str]]) -> None:
    def getaddrinfo(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        if host not in answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
            for a in answers[host]
        ]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)  # the module egress resolves with


#: (address, what the refusal names). Every form an address can take that does not reach a global host.
REFUSED = [
    # IPv4 special ranges
    ("127.0.0.1", "loopback"),
    ("10.1.2.3", "private"),
    ("172.16.0.1", "private"),
    ("192.168.0.1", "private"),
    ("169.254.169.254", "link-local"),
    ("100.64.0.1", "shared address space"),
    ("100.127.255.254", "shared address space"),
    ("198.18.0.1", "benchmarking"),
    ("198.19.255.254", "benchmarking"),
    ("0.0.0.0", "'this network'"),
    ("0.1.2.3", "'this network'"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "broadcast"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("192.0.0.8", "IETF protocol assignments"),
    ("192.0.2.1", "documentation"),
    ("198.51.100.1", "documentation"),
    ("203.0.113.1", "documentation"),
    ("192.88.99.1", "6to4 relay"),
    # IPv6 special ranges
    ("::", "unspecified"),
    ("::1", "loopback"),
    ("fec0::1", "site-local"),
    ("feff:ffff::1", "site-local"),
    ("fc00::1", "unique-local"),
    ("fd12:3456::1", "unique-local"),
    ("fe80::1", "link-local"),
    ("ff02::1", "multicast"),
    ("ff0e::1", "multicast"),
    ("2001:db8::1", "documentation"),
    ("3fff::1", "documentation"),
    ("100::1", "discard-only"),
    ("5f00::1", "segment routing"),
    # IPv4 addresses written as IPv6, public or not: the IPv4 address itself is the way to name one
    ("::ffff:127.0.0.1", "IPv4-mapped"),
    ("::ffff:10.0.0.1", "IPv4-mapped"),
    ("::ffff:8.8.8.8", "IPv4-mapped"),
    ("::ffff:0:7f00:1", "IPv4-translated"),
    ("::ffff:0:a00:1", "IPv4-translated"),
    ("::ffff:0:808:808", "IPv4-translated"),
    ("::127.0.0.1", "IPv4-compatible"),
    ("::10.0.0.1", "IPv4-compatible"),
    ("::8.8.8.8", "IPv4-compatible"),
    # NAT64 to a non-global IPv4 address; the local-use prefix whatever it embeds
    ("64:ff9b::7f00:1", "it reaches 127.0.0.1"),
    ("64:ff9b::a00:1", "it reaches 10.0.0.1"),
    ("64:ff9b::a9fe:a9fe", "it reaches 169.254.169.254"),
    ("64:ff9b::6440:1", "it reaches 100.64.0.1"),
    ("64:ff9b:1::7f00:1", "local-use NAT64"),
    ("64:ff9b:1::808:808", "local-use NAT64"),
    # 6to4 embedding a non-global IPv4 address
    ("2002:7f00:1::", "it reaches 127.0.0.1"),
    ("2002:a00:1::1", "it reaches 10.0.0.1"),
    ("2002:c0a8:1::", "it reaches 192.168.0.1"),
    ("2002:a9fe:a9fe::", "it reaches 169.254.169.254"),
    # Teredo: server 10.0.0.1; client 127.0.0.1; client 192.0.2.45; public ends (Teredo is never global)
    ("2001:0:a00:1::", "Teredo"),
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "Teredo"),
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"),
    ("2001:0:4136:e378:8000:63bf:f7f7:f7f7", "Teredo"),
]

#: Global addresses, and the 6to4 and NAT64 (well-known prefix) forms of a global IPv4 address.
ALLOWED = [
    "8.8.8.8",
    "1.1.1.1",
    "93.184.215.14",
    "2606:4700:4700::1111",
    "2001:4860:4860::8888",
    "2a00:1450:4001:80b::200e",
    "64:ff9b::808:808",
    "2002:808:808::1",
]


def literal(addr: str) -> str:
    return f"[{addr}]" if ":" in addr else addr


@pytest.mark.parametrize(("addr", "why"), REFUSED)
def test_every_non_global_form_is_refused_as_a_literal_and_as_a_dns_answer(
    addr: str, why: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not public(ipaddress.ip_address(addr))
    url = f"http://{literal(addr)}:8765/hook"
    with pytest.raises(Refused, match="non-public") as refused:
        pin(url)
    assert why in str(refused.value), str(refused.value)
    assert pin(url, allow_private=True).url == url  # the operator may allow it
    fake_dns(monkeypatch, {"hooks.example": ["93.184.215.14", addr]})
    with pytest.raises(Refused, match=re.escape(why)):
        pin("https://hooks.example/hook")


@pytest.mark.parametrize("addr", ALLOWED)
def test_global_addresses_are_allowed_as_a_literal_and_as_a_dns_answer(
    addr: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert public(ipaddress.ip_address(addr))
    assert pin(f"http://{literal(addr)}/hook").url == f"http://{literal(addr)}/hook"
    fake_dns(monkeypatch, {"hooks.example": [addr]})
    target = pin("https://hooks.example/hook")
    assert target.url == f"https://{literal(addr)}/hook" and target.headers == {"Host": "hooks.example"}


@pytest.mark.parametrize("host", ["2130706433", "0x7f000001", "0x7f.1", "127.1", "017700000001"])
def test_numeric_ipv4_spellings_are_checked_as_the_address_they_name(host: str) -> None:
    """The C resolver reads these as 127.0.0.1 (inet_aton forms); the check sees what the connection would use."""
    with pytest.raises(Refused):
        pin(f"http://{host}:8765/hook")


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8765/api/v1/tokens",
        "http://[::1]/",
        "http://169.254.169.254/latest/meta-data/",
        "http://0.0.0.0:8765/",
        "http://[fe80::1%25eth0]/",
        "http://[fec0::1]/",
        "http://[::ffff:0:7f00:1]/",
    ],
)
def test_non_public_addresses_are_refused(url: str) -> None:
    with pytest.raises(Refused):
        pin(url)
    assert pin(url, allow_private=True).url == url


def test_every_resolved_address_is_checked_and_the_connection_is_pinned(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_dns(monkeypatch, {"mixed.example": ["93.184.215.14", "10.0.0.7"], "hooks.example": ["93.184.215.14"]})
    with pytest.raises(Refused, match=r"10\.0\.0\.7"):
        pin("https://mixed.example/hook")
    target = pin("https://hooks.example:8443/a/b?c=1")
    assert target.url == "https://93.184.215.14:8443/a/b?c=1"
    assert target.headers == {"Host": "hooks.example:8443"}
    assert target.extensions == {"sni_hostname": "hooks.example"}  # the certificate is checked for the name
    plain = pin("http://hooks.example/x")
    assert plain.url == "http://93.184.215.14/x" and plain.extensions == {}
    with pytest.raises(Refused, match="cannot resolve"):
        pin("http://nowhere.example/")


def test_the_allow_list_names_hosts_and_networks(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_dns(monkeypatch, {"alerts.internal": ["10.0.5.9"], "other.internal": ["10.0.6.1"]})
    allowed = ("alerts.internal", "10.0.6.0/24", "::1", "fec0::/10")
    assert pin("http://alerts.internal/h", allowed=allowed).url == "http://alerts.internal/h"
    assert pin("http://other.internal/h", allowed=allowed).url == "http://10.0.6.1/h"
    assert pin("http://[::1]:9/h", allowed=allowed).url == "http://[::1]:9/h"
    assert pin("http://[fec0::5]/h", allowed=allowed).url == "http://[fec0::5]/h"
    with pytest.raises(Refused):
        pin("http://10.0.7.1/h", allowed=allowed)
    with pytest.raises(Refused):
        pin("file:///etc/passwd")
