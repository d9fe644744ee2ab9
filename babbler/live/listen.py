"""`babblerctl web --listen` (pure: no I/O): the ADDRESS:PORT it is given (IPv6 in brackets),
read into a `Listen` or refused in one line saying what to write, and the Host check that keeps
a page served on loopback to loopback names (`host_allowed`). babbler.live.web binds and
serves."""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address, ip_address

from babbler.core.errors import BabblerError

DEFAULT_LISTEN = "127.0.0.1:8770"  # loopback: the page is this machine's own


@dataclass(frozen=True)
class Listen:
    host: IPv4Address | IPv6Address
    port: int

    @property
    def bind(self) -> str:
        """hypercorn's form, and a URL's: `127.0.0.1:8770`, `[::1]:8770`."""
        return (
            f"[{self.host}]:{self.port}" if self.host.version == 6 else f"{self.host}:{self.port}"
        )

    @property
    def loopback(self) -> bool:
        return self.host.is_loopback

    @property
    def url(self) -> str:
        return f"http://{self.bind}/"


def parse_listen(text: str) -> Listen:
    """`ADDRESS:PORT` (IPv6 in brackets) as given to --listen. Raises BabblerError saying
    what to write instead."""
    wanted = f"--listen wants ADDRESS:PORT, e.g. {DEFAULT_LISTEN} or [::1]:8770"
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        if not bracket or not rest.startswith(":"):
            raise BabblerError(f"{wanted}, got {text!r}")
        port = rest[1:]
    else:
        host, colon, port = text.rpartition(":")
        if not colon or not host:
            raise BabblerError(f"{wanted}, got {text!r}")
        if ":" in host:
            raise BabblerError(f"--listen: write an IPv6 address in brackets ([{host}]:{port})")
    try:
        address = ip_address(host)
    except ValueError:
        raise BabblerError(f"--listen: {host!r} is not an IP address ({wanted})") from None
    if isinstance(address, IPv6Address) and not text.startswith("["):
        raise BabblerError(f"--listen: write an IPv6 address in brackets ([{host}]:{port})")
    if isinstance(address, IPv4Address) and text.startswith("["):
        raise BabblerError(f"{wanted}, got {text!r}")
    if not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        raise BabblerError(f"--listen: the port must be 1-65535, got {port!r}")
    return Listen(address, int(port))


def host_allowed(host_header: str, listen: Listen) -> bool:
    """Whether a request's Host header may be served. On loopback only loopback names: a
    web site the browser visits cannot rebind its own name to 127.0.0.1 and read the mesh
    (DNS rebinding). Listening elsewhere the page is exposed anyway (web's --help says so)."""
    if not listen.loopback:
        return True
    host = host_header.strip().lower()
    host = host[1:].partition("]")[0] if host.startswith("[") else host.partition(":")[0]
    if host == "localhost":
        return True
    try:
        return ip_address(host).is_loopback
    except ValueError:
        return False
