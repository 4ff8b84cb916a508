"""Issue 14: which addresses a webhook may reach (server.alerts.egress), without a network."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from server.alerts import egress
from server.alerts.egress import Refused, pin


def fake_dns(monkeypatch: pytest.MonkeyPatch, answers: dict[str, list[str]]) -> None:
    def getaddrinfo(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        if host not in answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
            for a in answers[host]
        ]

    monkeypatch.setattr(egress.socket, "getaddrinfo", getaddrinfo)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8765/api/v1/tokens",
        "http://[::1]/",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.1.2.3/",
        "http://192.168.0.1/",
        "http://100.64.0.1/",
        "http://0.0.0.0:8765/",
        "http://[::ffff:127.0.0.1]/",
        "http://[fe80::1]/",
        "http://224.0.0.1/",
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
    allowed = ("alerts.internal", "10.0.6.0/24", "::1")
    assert pin("http://alerts.internal/h", allowed=allowed).url == "http://alerts.internal/h"
    assert pin("http://other.internal/h", allowed=allowed).url == "http://10.0.6.1/h"
    assert pin("http://[::1]:9/h", allowed=allowed).url == "http://[::1]:9/h"
    with pytest.raises(Refused):
        pin("http://10.0.7.1/h", allowed=allowed)
    with pytest.raises(Refused):
        pin("file:///etc/passwd")
