"""Which name a node may carry into an /etc/hosts line or a hostfile's `ssh` field (pure).

A node's name comes from its node info: whatever the far machine says, spaces, `#` and
`localhost` included. Only a valid host name (RFC 1123: dot-separated labels of letters,
digits and inner hyphens, at most 63 characters each, 253 in all, not all digits) that no
other node also claims, and that is not a name this host already answers to, is written as
it is; any other node is written as `node-<its node id>`, which is always valid and unique.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$", re.IGNORECASE)

# Names every host already has (Debian's and macOS's /etc/hosts): a line giving one of them
# a mesh address would take it over.
RESERVED = frozenset(
    {
        "localhost",
        "localhost.localdomain",
        "ip6-localhost",
        "ip6-loopback",
        "ip6-localnet",
        "ip6-mcastprefix",
        "ip6-allnodes",
        "ip6-allrouters",
        "broadcasthost",
    }
)


def valid_host_name(name: str) -> bool:
    """A name a resolver and ssh take as it is (RFC 1123 labels; not an IPv4 address)."""
    if not name or len(name) > 253 or not name.isascii():
        return False
    labels = name.removesuffix(".").split(".")
    if not all(_LABEL.match(label) for label in labels):
        return False
    return not all(label.isdigit() for label in labels)  # 10.77.0.1 is no name


def fallback(node_id: str) -> str:
    return f"node-{node_id}"


def names(nodes: Iterable[tuple[str, str | None]], taken: Iterable[str] = ()) -> dict[str, str]:
    """node id -> the name to write, for (node id, name or None) pairs. `taken`: names this
    host already answers to (its host name, ...); those and RESERVED are never written, nor a
    name two nodes claim (compared without case, as resolvers do)."""
    pairs = list(nodes)
    claimed = Counter(name.lower() for _, name in pairs if name)
    shared = {n for n, count in claimed.items() if count > 1}
    refused = {n.lower() for n in taken} | RESERVED | shared
    out = {}
    for node_id, name in pairs:
        ok = (
            name is not None
            and valid_host_name(name)
            and name.lower() not in refused
            and not (name.lower().startswith("node-") and name.lower() != fallback(node_id))
        )  # another node's fallback name is not for anyone else
        out[node_id] = name if ok and name is not None else fallback(node_id)
    return out
