"""macOS links: what they are, their addresses, changes, and address/route edits.

- Addresses: netifaces, one read per link and pass (IPv6 addresses with their IN6_IFF_* flags,
  so a tentative link-local is not yet usable).
- What a link is: `ifconfig -l` / `ifconfig -l -u` (names, and which are up),
  `networksetup -listallhardwareports` (which `en*` is the Wi-Fi port, which is Thunderbolt),
  `ifconfig bridgeN` (members of a bridge, e.g. the ports in "Thunderbolt Bridge").
- Changes: a PF_ROUTE socket is the trigger (interface, address and route messages); a re-read
  every REREAD_INTERVAL seconds covers anything it does not announce.
- Edits: `ifconfig IF inet6 ADDR/128 add|delete`; babeld's routes are the RTF_PROTO2 ones
  (flag `2` in `netstat -rn`) and are deleted with `route -n delete -inet6`.

The outputs are read by the pure core/darwin_output.py (`babblerctl doctor` reads them there
too) and the system is reached only through `System`, so all of this is tested on Linux with
transcribed outputs (typed in macOS's format, not captured on a Mac:
tests/unit/data/darwin/README.md) and a fake route socket (tests/unit/test_darwin.py).
"""

from __future__ import annotations

import errno
import importlib
import math
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import trio

from babbler.core.darwin_output import (
    address_command,
    babel_routes,
    babel_routes_v4,
    bridge_members,
    build_link,
    hardware_ports,
    ifconfig_blocks,
    ifconfig_state,
    inet_routes,
)
from babbler.core.errors import KernelError
from babbler.core.fence import Rule
from babbler.core.ipv4 import HostRoute
from babbler.core.links import AddressChange, Link
from babbler.daemon import farprobe
from babbler.daemon.links.events import EventSocket
from babbler.daemon.sysctls import COMMAND_TIMEOUT, Settings, SysctlCommand

LOOPBACK = "lo0"
REREAD_INTERVAL = 2.0
# How long `netstat -rn -f inet` (the IPv4 clash check's, at every pass) is taken as current
# while the route socket is silent: on a Mac every route added or deleted is a routing
# message, which wakes the next pass and makes it read afresh, as do babblerd's own edits.
# Under CLASH_RECHECK (5 s, ipv4_service.py), the bound a host's new route is seen within
# where no message announces it (the lab's Macs have no route socket). The timer's passes
# every 2 s ran it each time: in a 10-node macOS lab about a fifth of the idle CPU.
ROUTES_FOR = 4.0
# An en* link that no hardware port names is asked about again this often (networksetup
# costs ~0.1 s: every pass would be 5 % of a core on a T2 Mac, whose T2 link never has one).
UNNAMED_RECHECK = 30.0


# -- the system, reached through one small seam -----------------------------------------------


Runner = Callable[[Sequence[str]], Awaitable[str]]


@dataclass(frozen=True)
class Addresses:
    """A link's addresses, as netifaces gives them: both families from one read."""

    inet6: list[dict[str, Any]] = field(default_factory=list)  # AF_INET6 entries
    inet: list[dict[str, Any]] = field(default_factory=list)  # AF_INET entries


@dataclass
class System:
    """How the backend reaches macOS; tests pass transcribed answers instead."""

    run: Runner  # runs a command, returns its output; raises KernelError when it fails
    addresses: Callable[[str], Addresses]  # netifaces' for a link
    index: Callable[[str], int]  # if_nametoindex


async def _kill(process: trio.Process) -> None:
    process.kill()  # a command that hangs gets no grace: nothing of it is kept


async def run_command(args: Sequence[str], hung_after: float = COMMAND_TIMEOUT) -> str:
    """Run a command off the trio loop, ended after `hung_after` seconds; its output.
    Raises KernelError when it cannot run, fails or hangs."""
    command = " ".join(args)
    with trio.move_on_after(hung_after) as scope:
        try:
            result = await trio.run_process(
                list(args),
                capture_stdout=True,
                capture_stderr=True,
                check=False,
                deliver_cancel=_kill,
            )
        except OSError as error:  # not installed, not executable
            raise KernelError(f"{command}: {error.strerror or error}", errno.EIO) from None
    if scope.cancelled_caught:
        raise KernelError(f"{command}: no answer in {hung_after:g} s", errno.ETIMEDOUT)
    if result.returncode != 0:
        # what it said: on its error output, or (networksetup's way) on its output
        said = (result.stderr or result.stdout).decode(errors="replace").split("\n")
        message = "; ".join(line.strip() for line in said if line.strip())
        raise KernelError(f"{command}: {message or f'exit {result.returncode}'}", errno.EIO)
    return bytes(result.stdout).decode(errors="replace")


def netifaces_addresses(name: str) -> Addresses:
    """One netifaces read (a getifaddrs(3) of the whole machine) for both families: a pass
    reads each link once, not once per family."""
    netifaces: Any = importlib.import_module("netifaces")
    try:
        found: dict[int, list[dict[str, Any]]] = netifaces.ifaddresses(name)
    except ValueError:  # the interface went away between listing and reading
        return Addresses()
    return Addresses(found.get(netifaces.AF_INET6, []), found.get(netifaces.AF_INET, []))


def real_system() -> System:
    return System(run=run_command, addresses=netifaces_addresses, index=socket.if_nametoindex)


# Address removal errors that mean "already gone".
_GONE = ("Can't assign requested address", "does not exist", "Device not configured")


class DarwinKernel:
    """The Kernel protocol (links.kernel) on macOS."""

    settings: Settings | None = SysctlCommand()

    def __init__(
        self,
        system: System,
        route_socket: trio.socket.SocketType | None,
        reread_interval: float = REREAD_INTERVAL,
    ) -> None:
        self.reread_interval = reread_interval
        self._system = system
        self.events = EventSocket(route_socket) if route_socket is not None else None
        self._ports: dict[str, str] = {}
        self._ports_for: frozenset[str] = frozenset()
        self._routes_v4: tuple[float, list[HostRoute]] | None = None  # (read at, routes)
        self._asked_at = -math.inf  # when networksetup was last asked (trio time)

    async def _hardware_ports(self, all_names: Iterable[str]) -> dict[str, str]:
        """networksetup is slow (~0.1 s): asked again when the set of `en*` changes, and
        every UNNAMED_RECHECK while one of them has no port (not a cable until it has: a
        T2 Mac's link to its T2 never has; a new adapter may be listed a moment late)."""
        wanted = frozenset(n for n in all_names if n.startswith("en"))
        now = trio.current_time()
        unnamed = wanted - self._ports.keys()
        if wanted != self._ports_for or (unnamed and now >= self._asked_at + UNNAMED_RECHECK):
            text = await self._system.run(["networksetup", "-listallhardwareports"])
            ports = hardware_ports(text)
            if wanted and not ports:  # else Wi-Fi would look like a cable
                said = f"networksetup printed no hardware port: {text[:60]!r}"
                raise KernelError(said, errno.EIO)
            self._ports, self._ports_for, self._asked_at = ports, wanted, now
        return self._ports

    async def read_links(self) -> dict[str, Link]:
        """One `ifconfig` listing (names, which are up, bridges' members, MTUs: what `-l`,
        `-l -u` and `ifconfig bridgeN` would say, in one process instead of four, every
        pass), networksetup when the ports changed, netifaces for the addresses."""
        listing = await self._system.run(["ifconfig"])
        blocks = ifconfig_blocks(listing)
        all_names = list(blocks)
        if LOOPBACK not in all_names:  # every Mac has it: this is not ifconfig's answer
            said = f"ifconfig printed no {LOOPBACK}: {listing[:60]!r}"
            raise KernelError(said, errno.EIO)
        states = {name: ifconfig_state(lines) for name, lines in blocks.items()}
        up = {name for name, state in states.items() if state.up}
        ports = await self._hardware_ports(all_names)
        indexes: dict[str, int] = {}
        for name in all_names:
            try:
                indexes[name] = self._system.index(name)
            except OSError:
                continue  # gone since the listing
        masters: dict[str, int] = {}
        for bridge in (n for n in indexes if n.startswith("bridge")):
            members = bridge_members("\n".join(blocks[bridge]))
            masters.update(dict.fromkeys(members, indexes[bridge]))
        links = {}
        for name, index in indexes.items():
            found = self._system.addresses(name)
            links[name] = build_link(
                name,
                index,
                port=ports.get(name),
                bridge_index=masters.get(name),
                up=name in up,
                inet6=found.inet6,
                carrier=states[name].active if name in states else None,
                speed_mbps=states[name].speed_mbps if name in states else None,
                inet=found.inet,
                mtu=states[name].mtu if name in states else None,
            )
        return links

    # Not yet: its route socket carries babeld's routes among the links' messages, and the
    # macOS lab has not measured what telling them apart costs. The table is dumped each second.
    routes_trigger = False

    async def wait_for_route_change(self) -> None:
        await trio.sleep_forever()

    async def wait_for_change(self) -> None:
        if self.events is None:
            await trio.sleep(self.reread_interval)
            return
        with trio.move_on_after(self.reread_interval) as silence:
            await trio.lowlevel.wait_readable(self.events.sock)
        if silence.cancelled_caught:
            return
        self._routes_v4 = None  # a message: a route may have come or gone
        await self.events.burst()

    async def _act(self, args: Sequence[str]) -> None:
        """Run a command that changes the Mac: its routes are read afresh after it."""
        self._routes_v4 = None
        await self._system.run(args)

    async def add_address(self, change: AddressChange) -> None:
        await self._act(address_command(change, "add"))

    async def remove_address(self, change: AddressChange) -> None:
        try:
            await self._act(address_command(change, "delete"))
        except KernelError as error:
            if not any(text in str(error) for text in _GONE):
                raise

    async def set_link_up(self, link: Link, up: bool) -> None:
        await self._act(["ifconfig", link.name, "up" if up else "down"])

    async def set_mtu(self, link: Link, size: int) -> None:
        await self._act(["ifconfig", link.name, "mtu", str(size)])

    far_link_locals = staticmethod(farprobe.far_link_locals)

    async def read_rules(self) -> set[Rule]:
        return set()  # macOS has no policy-routing rules: pf keeps outsiders out there

    async def add_rule(self, rule: Rule) -> None:
        raise KernelError("macOS has no policy-routing rules", 0)

    async def remove_rule(self, rule: Rule) -> None:
        return None

    async def read_routes_v4(self) -> list[HostRoute]:
        """The host's IPv4 routes: one `netstat` at most every ROUTES_FOR seconds while no
        routing message comes and babblerd changes nothing."""
        now = trio.current_time()
        if self._routes_v4 is not None and now - self._routes_v4[0] < ROUTES_FOR:
            return list(self._routes_v4[1])
        routes = inet_routes(await self._system.run(["netstat", "-rn", "-f", "inet"]))
        self._routes_v4 = (now, routes)
        return list(routes)

    async def flush_babel_routes(self) -> int:
        self._routes_v4 = None
        run = self._system.run
        routes = [
            *(("-inet6", d) for d in babel_routes(await run(["netstat", "-rn", "-f", "inet6"]))),
            *(("-inet", d) for d in babel_routes_v4(await run(["netstat", "-rn", "-f", "inet"]))),
        ]
        for family, destination in routes:
            try:
                await run(["route", "-n", "delete", family, destination])
            except KernelError as error:
                if "not in table" not in str(error):
                    raise
        return len(routes)


def open_route_socket() -> trio.socket.SocketType:
    """PF_ROUTE: every interface, address and route change on the machine (macOS, BSD)."""
    family = getattr(socket, "AF_ROUTE", None)
    if family is None:
        raise OSError(errno.EAFNOSUPPORT, "no PF_ROUTE on this platform")
    return trio.socket.socket(family, socket.SOCK_RAW, socket.AF_UNSPEC)


@asynccontextmanager
async def open_darwin_kernel() -> AsyncIterator[DarwinKernel]:
    events = open_route_socket()
    try:
        yield DarwinKernel(real_system(), events)
    finally:
        events.close()
