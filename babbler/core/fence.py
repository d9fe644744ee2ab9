"""The policy-routing rules that fence the mesh off from the host's other links (Linux;
DESIGN.md "babeld", kernel setup): pure, so that the daemon only adds and removes the
difference.

babeld installs its routes into a table of their own (TABLE, `export-table`), which is
looked up only for the mesh's prefixes (`to`), by this host's own traffic (`iif lo`) and by
traffic that came in on a mesh link from a source of the mesh (`from`). babeld's `in`
filters keep anything but the mesh's host routes out of that table (daemon/babeld/launch.py);
the `to` here keeps a route that got in anyway (an older babeld, a hand-made route) from
taking the host's other traffic. So:
- a LAN host that routes the mesh prefixes via this node finds no mesh route here, and the
  prefixes are unreachable for everything but the mesh and this host;
- what comes in on a mesh link and has no mesh route, or a source outside the mesh, is not
  sent on by the host's other routes (its default route, the LAN): unreachable;
- what comes in on a mesh link with a source of this node's own range, node address or
  cable addresses is a spoof (or a loop) and is dropped before any lookup;
- with a mesh key, a link forwards into the mesh only while babeld lists an authenticated
  neighbour on it (`carrying`): an outsider cabled to a keyed node, who is no neighbour,
  sends nothing through it, whatever source it writes (IPv6 has no reverse-path filter);
- this host's own traffic to a mesh address without a route fails at once instead of
  leaving by the default route; IPv4 cable addresses (the kernel's connected /31 routes, in
  `main`) are looked up in `main` without its default route, before babeld's table, so a
  cable's far end is reached over that cable while it is plugged in, and by its detour
  through the mesh (a /32 babeld learned) only while it is out (DESIGN.md "IPv4");
- when IPv6 forwarding was off before babblerd (Linux forwards IPv6 for all links or none),
  nothing that comes in on another link is forwarded anywhere (`blackhole`: dropped
  silently, as forwarding off drops it).

Rules keep the order of their priorities; the kernel's `local` table (priority 0) comes
first, so everything addressed to this host itself is delivered as before. The rules are
static per link (they follow links and neighbours, never routes: rules that followed routes
would churn on a large mesh).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Network

# babeld's routes. babeld (1.12 to 1.14, kernel_netlink.c) writes the table number into the
# 8-bit `rtm_table` alone, so it must be below 253 (6696 came out as table 40); 96 ends
# Babel's port number, 6696, which the rules' priorities start at.
TABLE = 96
PRIORITY = 6696  # the first of ours; ours end at LAST_PRIORITY
LAST_PRIORITY = PRIORITY + 5
PROTOCOL = 42  # RTPROT_BABEL: babeld's routes, and the rules babblerd adds for them
LOOPBACK = "lo"


def ours(protocol: int | None, priority: int | None) -> bool:
    """Whether a rule the kernel lists is one of babblerd's: marked with PROTOCOL, at
    babblerd's priorities (a rule of someone else's is never touched)."""
    return protocol == PROTOCOL and PRIORITY <= (priority or 0) <= LAST_PRIORITY


@dataclass(frozen=True, order=True)
class Rule:
    family: int  # 4 or 6
    priority: int
    action: str  # "lookup", "unreachable" or "blackhole"
    iif: str | None = None
    invert: bool = False  # `not iif ...`
    dst: str | None = None  # a network, "fde0:20c6:1fa7::/48"
    src: str | None = None  # a network, as `dst`
    table: int | None = None  # for "lookup"
    suppress_prefixlength: int | None = None

    def __str__(self) -> str:
        """As `ip rule` prints it (logs, the doctor)."""
        words = [f"-{self.family}", f"pref {self.priority}"]
        words += ["not"] if self.invert else []
        words += [f"iif {self.iif}"] if self.iif else []
        words += [f"from {self.src}"] if self.src else []
        words += [f"to {self.dst}"] if self.dst else []
        words += [f"lookup {self.table}"] if self.action == "lookup" else [self.action]
        if self.suppress_prefixlength is not None:
            words.append(f"suppress_prefixlength {self.suppress_prefixlength}")
        return " ".join(words)


@dataclass(frozen=True)
class Own:
    """This node's own sources: what no packet arriving on a mesh link may carry."""

    range_v6: IPv6Network  # the node range (node address and link addresses)
    node_v4: IPv4Address | None = None  # the IPv4 node address, while IPv4 runs
    cables_v4: tuple[IPv4Address, ...] = ()  # this node's ends of its cable /31s


def plan(
    mesh: Iterable[str],
    prefix_v6: IPv6Network,
    prefix_v4: IPv4Network | None,
    no_forwarding_v6: bool,
    own: Own | None = None,
    carrying: Iterable[str] | None = None,
) -> frozenset[Rule]:
    """The rules for the mesh links in use. `prefix_v4` None: IPv4 is off or refused (a
    clash: then the host's own routes own those addresses). `no_forwarding_v6`: IPv6
    forwarding was off before babblerd turned it on. `own`: this node's sources, dropped
    when they arrive on a link. `carrying`: the mesh links whose traffic may be forwarded
    into the mesh (with a key, those babeld lists an authenticated neighbour on); None:
    every mesh link."""
    links = sorted(mesh)
    forwarding = links if carrying is None else sorted(set(carrying) & set(links))
    out: set[Rule] = set()
    for family, prefix in ((6, prefix_v6), (4, prefix_v4)):
        out |= {Rule(family, PRIORITY + 3, "unreachable", iif=link) for link in links}
        if prefix is None:
            continue
        for mine in _own(own, family):
            out |= {Rule(family, PRIORITY, "blackhole", iif=link, src=mine) for link in links}
        net = str(prefix)
        if family == 4:
            # cable addresses: main's connected /31s, never its default route, and before
            # babeld's table: that one holds a pulled cable's far end as a /32 (its detour),
            # as `unreachable` for up to a minute after babeld retracted it
            main = Rule(4, PRIORITY + 1, "lookup", LOOPBACK, dst=net, table=254)
            out.add(dataclasses.replace(main, suppress_prefixlength=0))
        out.add(Rule(family, PRIORITY + 2, "lookup", iif=LOOPBACK, dst=net, table=TABLE))
        out |= {
            Rule(family, PRIORITY + 2, "lookup", iif=link, src=net, dst=net, table=TABLE)
            for link in forwarding
        }
        out.add(Rule(family, PRIORITY + 4, "unreachable", dst=net))
    if no_forwarding_v6:
        out.add(Rule(6, LAST_PRIORITY, "blackhole", iif=LOOPBACK, invert=True))
    return frozenset(out)


def carrying(neighbours: Iterable[tuple[str, str]], link_locals: Iterable[str]) -> set[str]:
    """With a key: the links that forward into the mesh, from babeld's neighbours (interface,
    address). babeld lists a neighbour once a packet's HMAC checks out, before its replay
    check (RFC 8967's challenge): one at this node's own link-local is its own hello sent
    back by whoever is on the cable, never a neighbour."""
    ours = set(link_locals)
    return {link for link, address in neighbours if address not in ours}


def _own(own: Own | None, family: int) -> list[str]:
    """This node's own sources of one family, as networks."""
    if own is None:
        return []
    if family == 6:
        return [str(own.range_v6)]
    mine = [own.node_v4] if own.node_v4 is not None else []
    return [f"{address}/32" for address in (*mine, *own.cables_v4)]
