"""What a lab's record (`lab.json`) may hold: this lab's namespaces and directories, links
between its own nodes, pids as numbers. `down` acts on what the record names, so a record
that names anything else is refused whole. A field an older babbler-lab did not write is
taken as it would have been (`DEFAULTS`, `NODE_DEFAULTS`), so that `down` still takes an
older lab down. Pure."""

from __future__ import annotations

import re
from copy import deepcopy
from typing import Any, TypeGuard

from babbler.lab.topology import TOPOLOGIES, LabError

MAX_NODES = 64
SPEEDS = (40, 80)  # Gb/s: a macOS node's Thunderbolt cables, Thunderbolt 4 or 5
# Fields an older babbler-lab did not write, as a lab of then was: the rest must be there.
DEFAULTS: dict[str, Any] = {"speed_gbps": SPEEDS[0], "cables": []}
NODE_DEFAULTS: dict[str, Any] = {"platform": "linux", "ports": [], "helper_pid": None}
FIELDS = ("name", "topology", "nodes", "links", "daemon_args", "real_links", *DEFAULTS)
NODE_FIELDS = ("index", "netns", "base", "pid", *NODE_DEFAULTS)
PLATFORMS = ("linux", "macos")
PREFIX = re.compile(r"[a-z]{1,12}")  # a cable set's: v, vb, thunderbolt (a name: 15 bytes)
PORT_NAME = re.compile(rf"{PREFIX.pattern}\d{{1,2}}x\d{{1,2}}")  # a lab link's name: v1x2


def netns_name(lab: str, index: int) -> str:
    """The namespace of node `index` of lab `lab`: `bbl-<lab>-n<index>`."""
    return f"bbl-{lab}-n{index}"


def node_base(lab_dir: str, index: int) -> str:
    """The directory of node `index` under its lab's directory."""
    return f"{lab_dir}/n{index}"


def _is_int(value: object) -> TypeGuard[int]:
    return type(value) is int  # not bool, which json also gives


def _completed(data: object, fields: tuple[str, ...], defaults: dict[str, Any]) -> object:
    """An object of exactly `fields`, those an older lab lacks filled in from `defaults`;
    anything else unchanged (for the check to refuse)."""
    if not isinstance(data, dict) or not set(fields) - set(defaults) <= set(data) <= set(fields):
        return data
    return {**deepcopy(defaults), **data}


def check_record(data: object, name: str, lab_dir: str) -> dict[str, Any]:
    """The record of lab `name` kept in `lab_dir`, checked field by field: the fields as
    read, with those an older lab did not write as it was. Raises LabError naming the first
    field that is not what this lab writes."""

    def refuse(why: str) -> LabError:
        return LabError(
            f"refusing {lab_dir}/lab.json: {why}; babbler-lab did not write it "
            f"(remove {lab_dir} if no lab of that name runs)"
        )

    data = _completed(data, FIELDS, DEFAULTS)
    if not isinstance(data, dict) or sorted(data) != sorted(FIELDS):
        raise refuse(f"not an object of the fields {', '.join(FIELDS)}")
    if data["name"] != name:
        raise refuse(f"it names lab {data['name']!r}")
    if data["topology"] not in TOPOLOGIES:
        raise refuse(f"unknown topology {data['topology']!r}")
    nodes = data["nodes"]
    if not isinstance(nodes, list) or not 1 <= len(nodes) <= MAX_NODES:
        raise refuse(f"nodes is not a list of 1 to {MAX_NODES} nodes")
    nodes = data["nodes"] = [_completed(node, NODE_FIELDS, NODE_DEFAULTS) for node in nodes]
    for index, node in enumerate(nodes, start=1):
        if not isinstance(node, dict) or sorted(node) != sorted(NODE_FIELDS):
            raise refuse(f"node {index} is not an object of the fields {', '.join(NODE_FIELDS)}")
        if node["index"] != index or not _is_int(node["index"]):
            raise refuse(f"node {index} has index {node['index']!r}")
        if node["netns"] != netns_name(name, index):
            raise refuse(
                f"node {index}'s namespace is {node['netns']!r}, not {netns_name(name, index)}"
            )
        if node["base"] != node_base(lab_dir, index):
            raise refuse(
                f"node {index}'s directory is {node['base']!r}, not {node_base(lab_dir, index)}"
            )
        for key in ("pid", "helper_pid"):
            pid = node[key]
            if pid is not None and not (_is_int(pid) and pid > 1):
                raise refuse(f"node {index}'s {key} is {pid!r}")
        if node["platform"] not in PLATFORMS:
            raise refuse(f"node {index}'s platform is {node['platform']!r}")
        ports = node["ports"]
        if not isinstance(ports, list) or not all(
            isinstance(p, str) and PORT_NAME.fullmatch(p) for p in ports
        ):
            raise refuse(f"node {index}'s ports are not lab link names")

    def joins_two(ends: list[object]) -> bool:
        """Two of its nodes, not the same one twice."""
        return ends[0] != ends[1] and all(_is_int(e) and 1 <= e <= len(nodes) for e in ends)

    links = data["links"]
    if not isinstance(links, list) or not all(
        isinstance(pair, list) and len(pair) == 2 and joins_two(pair) for pair in links
    ):
        raise refuse("links are not pairs of two of its nodes")
    cables = data["cables"]
    if not isinstance(cables, list) or not all(
        isinstance(cable, list)
        and len(cable) == 3
        and joins_two(cable[:2])
        and isinstance(cable[2], str)
        and PREFIX.fullmatch(cable[2])
        for cable in cables
    ):
        raise refuse("cables are not [a, b, prefix] of two of its nodes")
    if not _is_int(data["speed_gbps"]) or data["speed_gbps"] not in SPEEDS:
        raise refuse(f"speed_gbps is not one of {', '.join(map(str, SPEEDS))}")
    args = data["daemon_args"]
    if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
        raise refuse("daemon_args is not a list of strings")
    if not isinstance(data["real_links"], bool):
        raise refuse("real_links is not true or false")
    return data
