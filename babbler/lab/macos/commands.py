"""The macOS lab's commands: one command line in, what macOS would print out, or an act on the
node through the `Host` port. Pure: the server gives it a Host over netlink, the tests one
in memory.

Strict on purpose: only the command lines babblerd and `babblerctl doctor` run are answered
(ALLOWED, easy to extend); any other fails with an error and exit 64, never an empty
success. Where babblerd matches macOS's own error text (daemon/links/darwin.py `_GONE`, "not
in table"), the error is that text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from ipaddress import IPv4Interface, IPv6Interface, ip_interface, ip_network
from typing import Protocol

from babbler.lab.macos import output
from babbler.lab.macos.output import Address, Bus, Counters, Iface, Port, Route

MINIMUM_RDMA_MACOS = (26, 2)  # RDMA over Thunderbolt came with macOS 26.2 (TN3205)


@dataclass(frozen=True)
class Rdma:
    """The Mac's macOS version and RDMA over Thunderbolt state (`macos.json`)."""

    macos: str  # "26.2"
    state: str  # "enabled", "disabled", or "no-devices" (enabled, yet ibv_devices lists none)
    devices: tuple[tuple[str, str], ...] = ()  # a device per Thunderbolt port: (name, GUID)


USAGE = 64  # EX_USAGE: a command line the lab does not answer
FIREWALL = "/usr/libexec/ApplicationFirewall/socketfilterfw"
INET6_ENDS = (["add"], ["delete"], ["pltime", "0", "add"])  # what follows `inet6 A/N`
# What the lab answers, as people read it (docs/macos.md lists the same).
ALLOWED = (
    "ifconfig -l [-u]",
    "ifconfig [IF]",
    "ifconfig IF up|down",
    "ifconfig IF mtu N",
    "ifconfig IF inet A/N alias|-alias",
    "ifconfig IF inet6 A/N [pltime 0] add|delete",
    "ifconfig BRIDGE addm|deletem IF",
    "netstat -rn -f inet|inet6",
    "netstat -ibn",
    "route -n delete -inet|-inet6 DESTINATION",
    "sysctl -n NAME",
    "sysctl -w NAME=VALUE",
    "networksetup -listallhardwareports",
    "networksetup -setnetworkserviceenabled SERVICE on|off",
    "system_profiler SPThunderboltDataType -json",
    "socketfilterfw --getglobalstate|--getblockall",
    "sw_vers -productVersion",
    "rdma_ctl status",
    "ibv_devices",
)


class Failed(Exception):
    """The command fails: `text` on its standard error (none if empty), exit `code` (macOS's
    route and an ifconfig `mtu` that fails exit 0 all the same), `out` on its standard
    output (networksetup says its errors there)."""

    def __init__(self, text: str, code: int = 1, out: str = "") -> None:
        super().__init__(text)
        self.text, self.code, self.out = text, code, out


class Host(Protocol):
    """What the commands read and change on the node (the server: netlink and /proc/sys)."""

    def ifaces(self) -> list[Iface]: ...
    def counters(self) -> dict[str, Counters]: ...  # read now: counters move all the time
    def routes(self, family: int) -> list[Route]: ...
    def set_up(self, name: str, up: bool) -> None: ...
    def set_service(self, port: str, on: bool) -> None: ...  # a hardware port's service
    def set_mtu(self, name: str, size: int) -> None: ...
    def add_address(self, name: str, address: Address) -> None: ...
    def remove_address(self, name: str, address: Address) -> None: ...  # Failed if absent
    def delete_route(self, route: Route) -> None: ...
    def bridge(self, bridge: str, member: str, join: bool) -> None: ...
    def sysctl(self, name: str) -> str | None: ...  # None: no such name
    def set_sysctl(self, name: str, value: str) -> None: ...  # Failed when refused
    def ports(self) -> list[Port]: ...
    def buses(self) -> list[Bus]: ...
    def machine(self) -> str: ...
    def rdma(self) -> Rdma: ...


@dataclass(frozen=True)
class Answer:
    code: int
    out: str  # standard output
    err: str = ""  # standard error


def answer(host: Host, program: str, args: Sequence[str]) -> Answer:
    """Run one command line (`program`: its name, as called) against `host`."""
    name = program.rsplit("/", 1)[-1]
    handler = HANDLERS.get(name)
    try:
        if handler is None:
            raise Failed(f"{name}: command not found", 127)
        return Answer(0, handler(host, list(args)))
    except Failed as failed:
        err = failed.text.rstrip("\n")
        return Answer(failed.code, failed.out, err + "\n" if err else "")


def _refuse(program: str, args: Sequence[str]) -> Failed:
    line = " ".join([program, *args])
    return Failed(
        f"{program}: babbler-lab's macOS does not answer `{line}`"
        f" (it answers: {'; '.join(a for a in ALLOWED if a.startswith(program))})",
        USAGE,
    )


def _iface(host: Host, name: str) -> Iface:
    for iface in host.ifaces():
        if iface.name == name:
            return iface
    raise Failed(f"ifconfig: interface {name} does not exist")


def _ifconfig_verb(rest: list[str]) -> str | None:
    """What `ifconfig IF REST...` asks, when it is a line the lab answers (None: it is not).
    Told before the interface is looked up: a line the lab does not answer is refused as
    such, whether IF exists or not (`ifconfig bridge9 create` is not a missing bridge9)."""
    if not rest:
        return "show"
    if rest in (["up"], ["down"]):
        return "up"
    if len(rest) == 2 and rest[0] == "mtu" and rest[1].isdigit():
        return "mtu"
    if len(rest) == 2 and rest[0] in ("addm", "deletem"):
        return "member"
    if len(rest) == 3 and rest[0] == "inet" and rest[2] in ("alias", "-alias"):
        return "inet"
    if len(rest) >= 3 and rest[0] == "inet6" and rest[2:] in INET6_ENDS:
        return "inet6"
    return None


def ifconfig(host: Host, args: list[str]) -> str:
    if args in (["-l"], ["-l", "-u"]):
        return output.names(host.ifaces(), up_only=len(args) == 2)
    if not args:
        return output.listing(host.ifaces())
    rest = args[1:]
    verb = _ifconfig_verb(rest)
    if verb is None:
        raise _refuse("ifconfig", args)
    iface = _iface(host, args[0])
    if verb == "show":
        return output.block(iface, {i.name: i for i in host.ifaces()}, alone=True)
    if verb == "up":
        host.set_up(iface.name, rest[0] == "up")
    elif verb == "mtu":
        host.set_mtu(iface.name, int(rest[1]))
    elif verb == "member":
        if iface.kind != "bridge":
            raise _refuse("ifconfig", args)
        member = _iface(host, rest[1])
        if rest[0] == "deletem" and member.member_of != iface.name:
            raise Failed(f"ifconfig: BRDGDEL {rest[1]}: No such file or directory")
        host.bridge(iface.name, rest[1], rest[0] == "addm")
    else:
        address = _address(rest[1], 4 if verb == "inet" else 6, deprecated="pltime" in rest)
        if rest[-1] in ("alias", "add"):
            host.add_address(iface.name, address)
        else:
            _remove(host, iface, address)
    return ""


def _address(text: str, family: int, deprecated: bool = False) -> Address:
    try:
        parsed = ip_interface(text)
    except ValueError:
        raise Failed(f"ifconfig: {text}: bad value") from None
    if family == 4 and not isinstance(parsed, IPv4Interface):
        raise Failed(f"ifconfig: {text}: bad value")
    if family == 6 and not isinstance(parsed, IPv6Interface):
        raise Failed(f"ifconfig: {text}: bad value")
    return Address(parsed.ip, parsed.network.prefixlen, deprecated=deprecated)


def _remove(host: Host, iface: Iface, address: Address) -> None:
    """ifconfig's words are the same for both families (a constant in ifconfig.c)."""
    if not any(a.address == address.address for a in iface.addresses):
        raise Failed("ifconfig: ioctl (SIOCDIFADDR): Can't assign requested address")
    host.remove_address(iface.name, address)


def netstat(host: Host, args: list[str]) -> str:
    if args == ["-ibn"]:
        return output.interface_table(host.ifaces(), host.counters())
    if args not in (["-rn", "-f", "inet"], ["-rn", "-f", "inet6"]):
        raise _refuse("netstat", args)
    family = 4 if args[2] == "inet" else 6
    return output.netstat(host.routes(family), family, host.ifaces())


def route(host: Host, args: list[str]) -> str:
    if len(args) != 4 or args[:2] != ["-n", "delete"] or args[2] not in ("-inet", "-inet6"):
        raise _refuse("route", args)
    family = 4 if args[2] == "-inet" else 6
    try:
        wanted = ip_network(args[3].split("%")[0], strict=False)
    except ValueError:
        raise Failed(f"route: bad address: {args[3]}") from None
    kind = "net" if "/" in args[3] else "host"
    for found in host.routes(family):
        if found.destination == wanted:
            host.delete_route(found)
            return f"delete {kind} {args[3]}\n"
    # route.c: the error on both outputs, and exit 0 all the same
    raise Failed(
        "route: writing to routing socket: not in table",
        0,
        f"delete {kind} {args[3]}: not in table\n",
    )


def sysctl(host: Host, args: list[str]) -> str:
    if len(args) == 2 and args[0] == "-n":
        value = host.sysctl(args[1])
        if value is None:
            raise Failed(f"sysctl: unknown oid '{args[1]}'")
        return value + "\n"
    if len(args) == 2 and args[0] == "-w" and "=" in args[1]:
        name, value = args[1].split("=", 1)
        before = host.sysctl(name)
        if before is None:
            raise Failed(f"sysctl: unknown oid '{name}'")
        host.set_sysctl(name, value)
        return output.sysctl_set(name, before, value)
    raise _refuse("sysctl", args)


def networksetup(host: Host, args: list[str]) -> str:
    if args == ["-listallhardwareports"]:
        return output.hardware_ports(host.ports())
    if len(args) == 3 and args[0] == "-setnetworkserviceenabled" and args[2] in ("on", "off"):
        if not any(port.name == args[1] for port in host.ports()):
            # networksetup says it on its standard output, and exits 4
            unknown = f"{args[1]} is not a recognized network service.\n"
            raise Failed("", 4, f"{unknown}** Error: The parameters were not valid.\n")
        host.set_service(args[1], args[2] == "on")
        return ""
    raise _refuse("networksetup", args)


def system_profiler(host: Host, args: list[str]) -> str:
    if args != ["SPThunderboltDataType", "-json"]:
        raise _refuse("system_profiler", args)
    return output.thunderbolt(host.buses(), host.machine())


def socketfilterfw(host: Host, args: list[str]) -> str:
    if args == ["--getglobalstate"]:
        return output.FIREWALL_OFF
    if args == ["--getblockall"]:
        return output.BLOCK_ALL_OFF
    raise _refuse("socketfilterfw", args)


def sw_vers(host: Host, args: list[str]) -> str:
    if args != ["-productVersion"]:
        raise _refuse("sw_vers", args)
    return host.rdma().macos + "\n"


def _rdma_macos(host: Host, program: str) -> Rdma:
    """The state, where macOS has RDMA over Thunderbolt: before 26.2 there is no such
    command (the lab says so as a shell would)."""
    state = host.rdma()
    if tuple(int(p) for p in state.macos.split(".")) < MINIMUM_RDMA_MACOS:
        raise Failed(f"{program}: command not found", 127)
    return state


def rdma_ctl(host: Host, args: list[str]) -> str:
    # `enable` and `disable` work only in macOS Recovery (TN3205): not answered here
    if args != ["status"]:
        raise _refuse("rdma_ctl", args)
    return output.rdma_ctl_status(_rdma_macos(host, "rdma_ctl").state != "disabled")


def ibv_devices(host: Host, args: list[str]) -> str:
    if args:
        raise _refuse("ibv_devices", args)
    state = _rdma_macos(host, "ibv_devices")
    return output.ibv_devices(state.devices if state.state == "enabled" else ())


HANDLERS = {
    "ifconfig": ifconfig,
    "netstat": netstat,
    "route": route,
    "sysctl": sysctl,
    "networksetup": networksetup,
    "system_profiler": system_profiler,
    "socketfilterfw": socketfilterfw,
    "sw_vers": sw_vers,
    "rdma_ctl": rdma_ctl,
    "ibv_devices": ibv_devices,
}
PROGRAMS = (*HANDLERS, "launchctl")  # launchctl: the server's launchd answers it
