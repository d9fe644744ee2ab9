"""One lab node's macOS commands: a small server in the node's namespace that the commands on
its PATH (`shims`) ask. It reads the namespace through netlink and /proc/sys, acts through
`ip` (acts are rare: addresses, MTUs), and answers as macOS would (`commands`).

    ip netns exec NS python -m babbler.lab.macos.server NODE_DIR

It listens on 127.0.0.1:PORT of the namespace (bash reaches it through /dev/tcp without a
program of its own: a command costs a bash start-up and one round trip, not a Python one).
The request: the argument count, the program's name and each argument, each ended by a NUL.
The answer: a line with the exit status and the lengths in bytes of the standard error and
the standard output, then the standard error, then the standard output. Its log
(macos-server.log in NODE_DIR) has a line per command: the exit status, the command.
Described by `macos.json` in NODE_DIR, written by the lab: the machine's name, its hardware
ports and its Thunderbolt buses (their far ends' domains).
"""

from __future__ import annotations

import json
import re
import shlex
import socket
import socketserver
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address, ip_address, ip_network
from pathlib import Path
from typing import Any

from pyroute2 import IPRoute

from babbler.lab.macos.commands import Answer, Failed, Host, Rdma, answer
from babbler.lab.macos.launchd import Launchd
from babbler.lab.macos.output import Address, Bus, Counters, Iface, Port, Route
from babbler.lab.netns import PULLED

PORT = 6690  # on the namespace's loopback; babblerd's own ports are 6696-6699
DESCRIPTION = "macos.json"
COMMANDS = "bin"  # the node's commands, in its directory (lab.node.Node.bin_dir)
THUNDERBOLT = re.compile(r"^Thunderbolt \d+$")  # a port, not "Thunderbolt Bridge"
MAX_REQUEST = 1 << 16
# Requests served at once, by threads kept for the next (a thread started per command cost
# more than the answer: ~0.25 ms of ~0.7); babblerd runs one command at a time, doctor a few
WORKERS = 8
QUEUED = 64  # connections waiting for a worker (socketserver's 5 would drop a burst's SYNs)
REQUEST_TIMEOUT = 10.0  # s: a client that connects and says nothing lets its worker go
IFF_UP, IFF_LOOPBACK = 0x1, 0x8
IFA_F_DEPRECATED, IFA_F_TENTATIVE = 0x20, 0x40
RTPROT_BABEL = 42
RTPROT_KERNEL = 2
PROC_SYS = Path("/proc/sys")
# macOS's sysctl names and where the namespace keeps each (a Linux setting of the same
# meaning); None: kept by the server alone (no Linux counterpart changes behaviour here).
SYSCTLS: dict[str, str | None] = {
    "net.inet6.ip6.forwarding": "net/ipv6/conf/all/forwarding",
    "net.inet.ip.forwarding": "net/ipv4/ip_forward",
    "net.inet.ip.redirect": "net/ipv4/conf/all/send_redirects",
    "net.inet6.ip6.redirect": None,
}
BOOT_SESSION = "kern.bootsessionuuid"


@dataclass(frozen=True)
class Description:
    machine: str
    ports: list[tuple[str, str]]  # (port name, device)
    buses: list[dict[str, Any]]  # {"device", "receptacle", "speed_gbps", "domain", "far"}
    macos: str = "26.2"  # its version (`sw_vers`)
    rdma: str = "enabled"  # RDMA over Thunderbolt: enabled, disabled, no-devices

    @classmethod
    def read(cls, path: Path) -> Description:
        data = json.loads(path.read_text())
        ports, buses = [tuple(p) for p in data["ports"]], data["buses"]
        said = {k: data[k] for k in ("macos", "rdma") if k in data}  # a lab made before them
        return cls(data["machine"], ports, buses, **said)


# RTMGRP_LINK, RTMGRP_IPV4_IFADDR, RTMGRP_IPV4_ROUTE, RTMGRP_IPV6_IFADDR, RTMGRP_IPV6_ROUTE,
# on a plain netlink socket (pyroute2's own reader would take the messages first)
CHANGES = 0x1 | 0x10 | 0x40 | 0x100 | 0x400
NETLINK_ROUTE = 0


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise Failed(done.stderr.strip() or f"ip {' '.join(args)} failed")


class NetlinkHost:
    """The `commands.Host` of the namespace this process runs in."""

    def __init__(self, node_dir: Path) -> None:
        self._ipr = IPRoute()
        # The namespace's link, address and route changes: a snapshot is read again only
        # after one (a pass runs several commands in a row; each re-read cost ~3 ms)
        self._changes = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE)
        self._changes.bind((0, CHANGES))
        self._changes.setblocking(False)
        self._cache: dict[str, Any] = {}
        self._dir = node_dir
        self._kept: dict[str, str] = {"net.inet6.ip6.redirect": "1"}

    def close(self) -> None:
        self._ipr.close()
        self._changes.close()

    def _fresh(self, key: str, read: Callable[[], Any]) -> Any:
        """`read()`'s answer, kept until the namespace changes (or this server acts)."""
        changed = False
        while True:
            try:
                if not self._changes.recv(1 << 16):
                    break
            except BlockingIOError:
                break
            except OSError:  # ENOBUFS: changes were lost, which is a change
                pass
            changed = True
        if changed:
            self._cache.clear()
        if key not in self._cache:
            self._cache[key] = read()
        return self._cache[key]

    def _acted(self) -> None:
        self._cache.clear()

    def _description(self) -> Description:
        return Description.read(self._dir / DESCRIPTION)

    def ifaces(self) -> list[Iface]:
        found: list[Iface] = self._fresh("ifaces", self._read_ifaces)
        return found

    def _read_ifaces(self) -> list[Iface]:
        links = self._ipr.get_links()
        names = {m["index"]: m.get_attr("IFLA_IFNAME") for m in links}
        addresses: dict[int, list[Address]] = {}
        for m in self._ipr.get_addr():
            text = m.get_attr("IFA_ADDRESS") or m.get_attr("IFA_LOCAL")
            if text is None:
                continue
            flags = m.get_attr("IFA_FLAGS") or m["flags"]
            addresses.setdefault(m["index"], []).append(
                Address(
                    ip_address(text),
                    m["prefixlen"],
                    deprecated=bool(flags & IFA_F_DEPRECATED),
                    tentative=bool(flags & IFA_F_TENTATIVE),
                )
            )
        members: dict[int, list[str]] = {}
        for m in links:
            if m.get_attr("IFLA_MASTER"):
                members.setdefault(m.get_attr("IFLA_MASTER"), []).append(names[m["index"]])
        out = []
        for m in sorted(links, key=lambda m: m["index"]):
            info = m.get_attr("IFLA_LINKINFO")
            kind = info.get_attr("IFLA_INFO_KIND") if info is not None else None
            master = m.get_attr("IFLA_MASTER")
            pulled = m.get_attr("IFLA_IFALIAS") == PULLED  # up on a Mac, with no far end
            out.append(
                Iface(
                    name=names[m["index"]],
                    index=m["index"],
                    up=bool(m["flags"] & IFF_UP) or pulled,
                    carrier=bool(m.get_attr("IFLA_CARRIER")) and not pulled,
                    mtu=m.get_attr("IFLA_MTU"),
                    mac=m.get_attr("IFLA_ADDRESS"),
                    kind="loopback"
                    if m["flags"] & IFF_LOOPBACK
                    else "bridge"
                    if kind == "bridge"
                    else "ether",
                    addresses=tuple(addresses.get(m["index"], [])),
                    members=tuple(sorted(members.get(m["index"], []))),
                    member_of=names.get(master) if master else None,
                )
            )
        return out

    def counters(self) -> dict[str, Counters]:
        """Each link's counters, read now (never kept: they move without a netlink message)."""
        found = {}
        for m in self._ipr.get_links():
            stats = m.get_attr("IFLA_STATS64") or m.get_attr("IFLA_STATS")
            if stats is None:
                continue
            found[m.get_attr("IFLA_IFNAME")] = Counters(
                rx_bytes=stats["rx_bytes"],
                tx_bytes=stats["tx_bytes"],
                rx_packets=stats["rx_packets"],
                tx_packets=stats["tx_packets"],
            )
        return found

    def routes(self, family: int) -> list[Route]:
        found: list[Route] = self._fresh(f"routes{family}", lambda: self._read_routes(family))
        return found

    def _read_routes(self, family: int) -> list[Route]:
        af = socket.AF_INET if family == 4 else socket.AF_INET6
        names = {m["index"]: m.get_attr("IFLA_IFNAME") for m in self._ipr.get_links()}
        out = []
        for m in self._ipr.get_routes(family=af, table=254):
            if m["type"] != 1:  # unicast only
                continue
            dst = m.get_attr("RTA_DST") or ("0.0.0.0" if family == 4 else "::")
            destination = ip_network(f"{dst}/{m['dst_len']}", strict=False)
            if destination.is_multicast:
                continue
            gateway = m.get_attr("RTA_GATEWAY")
            own = m["proto"] == RTPROT_KERNEL and destination.prefixlen == 128
            if own:  # Linux's route to an address of its own: listed as a Mac lists it
                continue
            out.append(
                Route(
                    destination,
                    names.get(m.get_attr("RTA_OIF"), "?"),
                    ip_address(gateway) if gateway else None,
                    babel=m["proto"] == RTPROT_BABEL,
                )
            )
        return out

    def set_up(self, name: str, up: bool) -> None:
        """A port whose cable the lab pulled out is down underneath and up as the Mac
        shows it: `up` leaves it so (plugging brings it up), `down` makes it down."""
        self._acted()
        pulled = any(
            m.get_attr("IFLA_IFNAME") == name and m.get_attr("IFLA_IFALIAS") == PULLED
            for m in self._ipr.get_links()
        )
        if pulled and up:
            return
        _ip("link", "set", name, "up" if up else "down", *(("alias", "") if pulled else ()))

    def set_service(self, port: str, on: bool) -> None:
        """A service off leaves its device down (its members stay in a bridge: macOS keeps
        them there until `ifconfig bridge0 deletem`)."""
        self._acted()
        device = dict(self._description().ports).get(port)
        if device is not None:
            self.set_up(device, on)

    def set_mtu(self, name: str, size: int) -> None:
        self._acted()
        try:
            _ip("link", "set", name, "mtu", str(size))
        except Failed:  # ifconfig.c warns, and exits 0 all the same
            raise Failed("ifconfig: ioctl (set mtu): Invalid argument", 0) from None

    def add_address(self, name: str, address: Address) -> None:
        self._acted()
        where = f"{address.address}/{address.prefixlen}"
        if isinstance(address.address, IPv4Address):
            _ip("-4", "addr", "replace", where, "dev", name)
            return
        lifetime = ["preferred_lft", "0"] if address.deprecated else []
        _ip("-6", "addr", "replace", where, "dev", name, "nodad", *lifetime)

    def remove_address(self, name: str, address: Address) -> None:
        self._acted()
        _ip("addr", "del", f"{address.address}/{address.prefixlen}", "dev", name)

    def delete_route(self, route: Route) -> None:
        self._acted()
        family = "-4" if route.destination.version == 4 else "-6"
        _ip(family, "route", "del", str(route.destination), "dev", route.interface)

    def bridge(self, bridge: str, member: str, join: bool) -> None:
        """A port joins or leaves a bridge. In a bridge a Mac's port has no IPv6 link-local
        (the lab keeps it so: addr_gen_mode 1); out of it, it gets one."""
        self._acted()
        mode = PROC_SYS / f"net/ipv6/conf/{member}/addr_gen_mode"
        if join:
            _ip("link", "set", member, "master", bridge)
            mode.write_text("1\n")
            _ip("-6", "addr", "flush", "dev", member, "scope", "link")
            return
        _ip("link", "set", member, "nomaster")
        mode.write_text("0\n")
        mac = next(i.mac for i in self.ifaces() if i.name == member)
        if mac:
            _ip("-6", "addr", "replace", f"{eui64_link_local(mac)}/64", "dev", member, "nodad")

    def sysctl(self, name: str) -> str | None:
        if name == BOOT_SESSION:
            return (PROC_SYS / "kernel/random/boot_id").read_text().strip().upper()
        if name not in SYSCTLS:
            return None
        where = SYSCTLS[name]
        if where is None:
            return self._kept.get(name, "0")
        return (PROC_SYS / where).read_text().strip()

    def set_sysctl(self, name: str, value: str) -> None:
        if name == BOOT_SESSION or name not in SYSCTLS:
            raise Failed(f"sysctl: oid '{name}' is read only")
        if not value.isdigit():
            raise Failed(f"sysctl: {name}: Invalid argument")
        where = SYSCTLS[name]
        if where is None:
            self._kept[name] = value
            return
        (PROC_SYS / where).write_text(value + "\n")

    def ports(self) -> list[Port]:
        macs = {i.name: i.mac or "00:00:00:00:00:00" for i in self.ifaces()}
        return [
            Port(name, device, macs.get(device, "00:00:00:00:00:00"))
            for name, device in self._description().ports
            if device in macs
        ]

    def buses(self) -> list[Bus]:
        carrier = {i.name: i.carrier and i.up for i in self.ifaces()}
        return [
            Bus(
                receptacle=b["receptacle"],
                speed_gbps=b["speed_gbps"],
                domain_uuid=b["domain"],
                far=b["far"] if carrier.get(b["device"]) else None,
                far_name=b.get("far_name", "Mac"),
            )
            for b in self._description().buses
        ]

    def machine(self) -> str:
        return self._description().machine

    def rdma(self) -> Rdma:
        """A device per Thunderbolt port, cabled or not (TN3205's Mac mini lists all three),
        its GUID from the port's bus (TN3205's differ in their first byte)."""
        told = self._description()
        domains = {b["device"]: b["domain"].replace("-", "").lower() for b in told.buses}
        ports = [device for name, device in told.ports if THUNDERBOLT.match(name)]
        devices = tuple(
            (f"rdma_{device}", f"{0xE0 + i:02x}{domains.get(device, '0' * 14)[:14]}")
            for i, device in enumerate(ports)
        )
        return Rdma(told.macos, told.rdma, devices)


def eui64_link_local(mac: str) -> IPv6Address:
    octets = [int(x, 16) for x in mac.split(":")]
    octets[0] ^= 0x02
    eui = [*octets[:3], 0xFF, 0xFE, *octets[3:]]
    return IPv6Address(bytes([0xFE, 0x80, 0, 0, 0, 0, 0, 0, *eui]))


def open_server(
    host: Host, port: int = PORT, launchd: Launchd | None = None
) -> socketserver.TCPServer:
    """A server answering the commands against `host` on 127.0.0.1:`port` (0: a free one),
    bound and listening; the caller runs its `serve_forever` and closes it. `launchd`
    answers `launchctl`, outside the commands' lock: a bootout waits for a job that runs
    commands while it stops."""
    lock = threading.Lock()
    log_lock = threading.Lock()  # a log line whole, also from launchctl outside `lock`

    def run(program: str, args: list[str]) -> Answer:
        if launchd is not None and program.rsplit("/", 1)[-1] == "launchctl":
            return launchd.answer(args)
        with lock:
            return answer(host, program, args)

    class Handler(socketserver.StreamRequestHandler):
        timeout = REQUEST_TIMEOUT

        def handle(self) -> None:
            parts = self._read()
            if parts is None:
                return
            program, args = parts
            try:
                result = run(program, args)
            except Exception as error:  # the lab's fault, said as one line, not a crash
                result = Answer(70, "", f"{program}: babbler-lab's macOS failed: {error}\n")
            # The log says what babblerd ran on its "Mac", one line each: exit, line
            with log_lock:
                print(result.code, shlex.join([program, *args]), flush=True)
            err, out = result.err.encode(), result.out.encode()
            self.wfile.write(f"{result.code} {len(err)} {len(out)}\n".encode() + err + out)

        def _read(self) -> tuple[str, list[str]] | None:
            data = b""
            while True:
                fields = data.split(b"\0")
                if len(fields) > 2 and fields[0].isdigit():
                    count = int(fields[0])
                    if len(fields) > count + 2:
                        words = [f.decode(errors="replace") for f in fields[1 : count + 2]]
                        return words[0], words[1:]
                try:
                    chunk = self.rfile.read1(4096)
                except TimeoutError:
                    return None
                if not chunk or len(data) > MAX_REQUEST:
                    return None
                data += chunk

    return PooledServer(("127.0.0.1", port), Handler)


class PooledServer(socketserver.TCPServer):
    """socketserver's TCP server with a pool of WORKERS threads (ThreadingMixIn starts one
    per request)."""

    allow_reuse_address = True
    request_queue_size = QUEUED

    def __init__(self, address: tuple[str, int], handler: Any) -> None:
        self._pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="command")
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        self._pool.submit(self._serve, request, client_address)

    def _serve(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)

    def server_close(self) -> None:
        super().server_close()
        self._pool.shutdown(cancel_futures=True)


def serve(node_dir: Path, port: int = PORT) -> None:
    launchd = Launchd(node_dir / COMMANDS)
    with open_server(NetlinkHost(node_dir), port, launchd) as server:
        print(f"serving on 127.0.0.1:{port}", flush=True)
        try:
            server.serve_forever()
        finally:
            launchd.stop_all()


if __name__ == "__main__":
    serve(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else PORT)
