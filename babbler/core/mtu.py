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

The far end of a link is the node core/farend.py finds there; its offer is the `max_mtu`
its info says for its link that faces ours. Parallel cables between the same two nodes each
find their own far end that way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from babbler.core.links import Link

if TYPE_CHECKING:  # only its type: core/config.py imports this module on babblerd's lean start
    from babbler.core.farend import FarEnd

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


def far_offers(ends: Iterable[FarEnd], infos: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """This node's link -> the far end's offer. `ends`: core/farend.py's far ends (with the
    other nodes' infos); `infos`: node id -> its node info. Two far ends on one link (an
    answer from before a cable moved, while babeld names nobody there): the smaller offer,
    which both can run."""
    out: dict[str, int] = {}
    for end in ends:
        interfaces = _dicts(infos.get(end.node, {}).get("interfaces"))
        theirs = {str(i.get("name")): valid(i.get("max_mtu")) for i in interfaces}
        for their_link in end.their_links:
            size = theirs.get(their_link)
            if size is not None:
                out[end.link] = min(size, out.get(end.link, size))
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
