"""Reaction: a link comes up -> its mesh address is present and babeld has it.

A 2-node line with real babeld. A probe inside n1's namespace takes the link down and up
--cycles times; for each cycle it records, on its own netlink socket and on a `monitor`
connection to babblerd, when
  - the kernel's link-local address became usable (the kernel's part: link-watch delay),
  - babblerd's mesh address appeared on the link,
  - babeld was told (`add interface ...` on monitor: babeld acknowledged `interface`),
  - babeld itself saw the link up (`... interface ... up true`; it waits for the kernel's
    operational state, which the kernel's link-watch delays by up to ~1 s).
Reported from the moment the link-local was usable (babblerd's part, the goal: p99 < 50 ms)
and from `ip link set up` (what a user sees).

    sudo .venv/bin/python bench/reaction.py [--cycles 200] [--quick] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import common

from babbler.lab import Lab

PROBE = r"""
import json, select, socket, subprocess, sys, time
from pyroute2.netlink.rtnl.marshal import MarshalRtnl

RTMGRP_IPV6_IFADDR = 0x100
IFA_F_TENTATIVE = 0x40
link, sock_path, cycles = sys.argv[1], sys.argv[2], int(sys.argv[3])
index = socket.if_nametoindex(link)
events = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
events.bind((0, RTMGRP_IPV6_IFADDR))
events.setblocking(False)
marshal = MarshalRtnl()
mon = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
mon.connect(sock_path)
buf = b""
while not buf.endswith(b"ok\n"):
    buf += mon.recv(65536)
mon.sendall(b"monitor\n")
time.sleep(0.5)
mon.setblocking(False)


def drain(sock):
    try:
        while sock.recv(1 << 20):
            pass
    except BlockingIOError:
        pass


results = []
for _ in range(cycles):
    subprocess.run(["ip", "link", "set", link, "down"], check=True)
    time.sleep(1.2)  # the kernel's link-watch holds back changes less than 1 s apart
    drain(mon)
    drain(events)
    up = time.monotonic()
    subprocess.run(["ip", "link", "set", link, "up"], check=True)
    seen = {"ip_returned": time.monotonic()}
    tail = b""
    end = up + 5
    while len(seen) < 5 and time.monotonic() < end:
        ready, _, _ = select.select([events, mon], [], [], 0.5)
        now = time.monotonic()
        if events in ready:
            try:
                data = events.recv(1 << 20)
            except BlockingIOError:
                data = b""
            for msg in marshal.parse(data):
                if msg["header"]["type"] != 20 or msg["index"] != index:  # RTM_NEWADDR
                    continue
                address = msg.get_attr("IFA_ADDRESS") or ""
                flags = msg.get_attr("IFA_FLAGS") or msg["flags"]
                if address.startswith("fe80") and not flags & IFA_F_TENTATIVE:
                    seen.setdefault("link_local", now)
                elif address.startswith("fde0:20c6:1fa7"):
                    seen.setdefault("mesh_address", now)
        if mon in ready:
            try:
                data = tail + mon.recv(1 << 20)
            except BlockingIOError:
                data = tail
            cut = data.rfind(b"\n") + 1
            tail = data[cut:]
            lines = data[:cut]
            if f"add interface {link} ".encode() in lines:
                seen.setdefault("babeld_told", now)
            for verb in (b"add", b"change"):
                if verb + f" interface {link} up true".encode() in lines:
                    seen.setdefault("babeld_up", now)
    results.append({k: v - up for k, v in seen.items()})
print(json.dumps(results))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="10 cycles")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    common.need_root()
    cycles = 10 if args.quick else args.cycles
    lab = Lab.create(f"br{os.getpid() % 10000}", 2, "line", ["--mode", "always"])
    try:
        lab.start_all()
        lab.wait_reachable(60)
        node = lab.nodes[0]
        probe = subprocess.run(
            ["ip", "netns", "exec", node.netns, sys.executable, "-c", PROBE, "v1x2",
             str(node.socket), str(cycles)],
            capture_output=True, text=True, check=True, timeout=cycles * 10 + 60,
        )  # fmt: skip
        cycles_seen: list[dict[str, float]] = json.loads(probe.stdout.splitlines()[-1])
    finally:
        lab.down()
    complete = [c for c in cycles_seen if len(c) == 5]
    ms = {
        "link_local_from_up": [c["link_local"] * 1000 for c in complete],
        "address_from_link_local": [(c["mesh_address"] - c["link_local"]) * 1000 for c in complete],
        "told_from_link_local": [(c["babeld_told"] - c["link_local"]) * 1000 for c in complete],
        "address_from_up": [c["mesh_address"] * 1000 for c in complete],
        "told_from_up": [c["babeld_told"] * 1000 for c in complete],
        "babeld_up_from_up": [c["babeld_up"] * 1000 for c in complete],
    }
    summaries: dict[str, Any] = {k: common.summary(v) for k, v in ms.items()}
    rows = [[k, s["n"], s["p50"], s["p90"], s["p99"], s["max"]] for k, s in summaries.items()]
    print(common.table("reaction (ms)", ["measure", "n", "p50", "p90", "p99", "max"], rows))
    data = {"cycles": cycles, "complete": len(complete), "summary_ms": summaries, "samples_ms": ms}
    print(f"\nwrote {common.write('reaction', data, args.out)}")


if __name__ == "__main__":
    main()
