"""Each cable's MTU (DESIGN.md "Interfaces"): both ends run the largest size both take. Pure.

A link's offer is the largest MTU this node runs it at. babblerd sizes a Thunderbolt link
under `--mtu auto` (the default) and every mesh link under `--mtu N`: its offer is the
driver's largest (Linux IFLA_MAX_MTU, 65520 for thunderbolt-net; macOS Thunderbolt 9000),
capped by N. Any other link keeps its size, and offers that. Node info says each link's
offer as `max_mtu`.

A sized link runs at the smaller of its own offer and the far end's, as the far end's info
says it. Both ends take the minimum of the same two numbers, so they agree without another
round of talk, and an offer does not depend on the size a link runs at now, so nothing
swings. Nothing moves while the far end says nothing: no info yet, a babblerd that does not
say `max_mtu`, a number outside MIN_MTU..MAX_MTU.

The far end of a link is found in the other nodes' infos: the neighbour they list whose
address is this link's link-local as babeld uses it (babeld's `interface` entry), on one of
their links. Parallel cables between the same two nodes each find their own far end that
way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from babbler.core.links import Link

MIN_MTU = 1280  # IPv6's minimum: below it Linux takes IPv6 off a link
MAX_MTU = 65535  # the largest an IP packet can be
AUTO = None  # `--mtu auto`: the setting as Config holds it


def sized(link: Link, setting: int | None) -> bool:
    """Whether babblerd chooses this link's size: Thunderbolt always, every link when
    `--mtu N` names a size (a switch without jumbo frames would drop them, so never by
    itself)."""
    return setting is not AUTO or link.is_thunderbolt


def offer(link: Link, setting: int | None) -> int | None:
    """The largest MTU this node runs `link` at (None: the platform says no size)."""
    if not sized(link, setting):
        return link.mtu
    largest = link.max_mtu or link.mtu
    if largest is None or setting is AUTO:
        return largest
    return min(largest, setting)


def valid(size: Any) -> int | None:
    """A size another node said, if it is one a link can run at."""
    if isinstance(size, int) and not isinstance(size, bool) and MIN_MTU <= size <= MAX_MTU:
        return size
    return None


def far_offers(
    link_locals: Mapping[str, str],
    infos: Iterable[tuple[str, Mapping[str, Any]]],
    neighbours: Mapping[str, set[str]],
    me: str,
) -> dict[str, int]:
    """This node's link -> the far end's offer. `link_locals`: link -> its link-local as
    babeld uses it; `infos`: (node id, node info) of the other nodes; `neighbours`: link ->
    the node ids babeld knows as neighbours on it (empty while it does not know: then any
    node listing the link-local counts). Two far ends claiming one link (an answer from
    before a cable moved): the smaller offer, which both can run. One link-local on two
    links (set by hand): each of them, unless babeld knows another node there."""
    by_address: dict[str, list[str]] = {}
    for name, address in link_locals.items():
        by_address.setdefault(address, []).append(name)
    out: dict[str, int] = {}
    for node, info in infos:
        theirs = {
            str(i.get("name")): valid(i.get("max_mtu")) for i in _dicts(info.get("interfaces"))
        }
        for neighbour in _dicts(info.get("neighbours")):
            size = theirs.get(str(neighbour.get("interface")))
            if size is None or neighbour.get("node_id") not in (None, me):
                continue
            for name in by_address.get(str(neighbour.get("address")), []):
                if neighbours.get(name) and node not in neighbours[name]:
                    continue  # babeld has another node on this link now
                out[name] = min(size, out.get(name, size))
    return out


def targets(links: Iterable[Link], setting: int | None, far: Mapping[str, int]) -> dict[str, int]:
    """Link -> the MTU to set: sized links whose far end said its offer and that do not run
    at the smaller of the two offers yet."""
    out = {}
    for link in links:
        mine, theirs = offer(link, setting), far.get(link.name)
        if not sized(link, setting) or mine is None or theirs is None:
            continue
        size = min(mine, theirs)
        if size >= MIN_MTU and size != link.mtu:
            out[link.name] = size
    return out


def _dicts(value: Any) -> list[Mapping[str, Any]]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []
