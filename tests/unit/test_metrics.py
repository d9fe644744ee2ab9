"""`babblerctl metrics`: a status and stats turned into Prometheus's text format (hostile
values left out, never a crash, names escaped), prometheus_client loaded only when metrics
are made, the file written atomically, and one-line errors."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from babbler.live.metrics import CONTENT_TYPE, command, exposition, render
from babbler.live.metricset import SPECS, Family, families
from tests.fakes.babblerd_socket import fake_babblerd
from tests.needs import tool

__all__ = ["fake_babblerd"]  # the fixture, used by name below

EVIL = 'n"2\\\n} evil{x="1"} 9\ud800'  # quotes, a backslash, a newline, a lone surrogate
EVIL_SHOWN = 'n"2\\\n} evil{x="1"} 9?'  # the surrogate cannot be encoded: "?"


def status() -> dict[str, Any]:
    """A status with every key the metrics read, in docs/protocol.md's shape."""
    return {
        "version": "0.1.0",
        "node_id": "1a2b3c4d5e6f",
        "name": "n1",
        "mode": "always",
        "platform": "linux",
        "mesh": "running",
        "babeld": {"pid": 123, "version": "babeld-1.12.1", "restarts": 2},
        "clients": 3,
        "ipv4_prefix": "10.77.0.0/16",
        "node_address_v4": "10.77.44.75",
        "ipv4_problem": None,
        "kernel_problem": "cannot read links: no answer in 6 s",
        "unmatched_globs": ["en9"],
        "interfaces": [
            {
                "name": "en2",
                "kind": "thunderbolt",
                "up": True,
                "babel": True,
                "speed_mbps": 40000,
                "cost": 32,
                "mtu": 9000,
                "counters": {"rx_bytes": 10, "tx_bytes": 20, "rx_packets": 1, "tx_packets": 2},
            },
            {"name": "en3", "kind": "ethernet", "up": False, "babel": False, "speed_mbps": None},
        ],
        "neighbours": [
            {
                "address": "fe80::1",
                "interface": "en2",
                "reach": "fff0",
                "cost": 96,
                "rtt": 0.25,
                "node_id": "000000000002",
            },
            {
                "address": "fe80::9",
                "interface": "en2",
                "reach": "ffff",
                "cost": 32,
                "rtt": None,
                "node_id": None,
            },
        ],
        "routes": [
            {"prefix": "fde0::2:0/128", "installed": True},
            {"prefix": "fde0::3:0/128", "installed": False},
            {"prefix": "10.77.0.2/32", "installed": True},
        ],
        "nodes": [
            {
                "node_id": "000000000002",
                "name": "n2",
                "reachable": True,
                "hops": 1,
                "metric": 96,
                "info_age_s": 1.5,
                "version": "0.1.0",
            },
            {
                "node_id": "000000000003",
                "name": None,
                "reachable": False,
                "hops": None,
                "metric": None,
                "info_age_s": None,
                "version": None,
            },
        ],
    }


STATS = {"pid": 9, "rss_bytes": 43204608, "open_fds": 17, "tasks": 40, "babeld_lines_in": 5,
         "babeld_repeats": 3, "info_asks": 4, "info_answers": 6, "info_pushes": 1,
         "info_pushed": 2}  # fmt: skip


def samples(shown: list[Family]) -> dict[str, dict[tuple[str, ...], float]]:
    return {family.spec.name: dict(family.samples) for family in shown}


def parsed(text: bytes) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """The exposition read back by prometheus_client's own parser: sample name -> labels
    -> value."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text.decode("utf-8")):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def test_a_status_and_stats_become_the_metrics_operations_lists() -> None:
    got = samples(families(status(), STATS))
    assert got["babbler_up"] == {(): 1}
    info = ("n1", "1a2b3c4d5e6f", "0.1.0", "babeld-1.12.1", "linux", "always")
    assert got["babbler_info"] == {info: 1}
    assert got["babbler_mesh_state"][("running",)] == 1
    assert got["babbler_mesh_state"][("idle",)] == 0 and len(got["babbler_mesh_state"]) == 5
    assert got["babbler_babeld_up"] == {(): 1} and got["babbler_babeld_restarts_total"] == {(): 2}
    assert got["babbler_clients"] == {(): 3}
    assert got["babbler_ipv4_state"] == {("off",): 0, ("waiting",): 0, ("on",): 1, ("refused",): 0}
    assert got["babbler_problem"] == {("kernel",): 1, ("ipv4",): 0, ("node_id",): 0}
    assert got["babbler_problem_info"] == {("kernel", "cannot read links: no answer in 6 s"): 1}
    assert got["babbler_unmatched_interface_patterns"] == {(): 1}
    assert got["babbler_link_info"] == {("en2", "thunderbolt"): 1, ("en3", "ethernet"): 1}
    assert got["babbler_link_up"] == {("en2",): 1, ("en3",): 0}
    assert got["babbler_link_speed_bytes_per_second"] == {("en2",): 5e9}  # 40 Gbit/s
    assert got["babbler_link_mtu_bytes"] == {("en2",): 9000}
    assert got["babbler_link_receive_bytes_total"] == {("en2",): 10}
    assert got["babbler_link_transmit_bytes_total"] == {("en2",): 20}
    assert got["babbler_link_receive_packets_total"] == {("en2",): 1}
    assert got["babbler_link_transmit_packets_total"] == {("en2",): 2}
    near, far = ("en2", "fe80::1", "n2", "000000000002"), ("en2", "fe80::9", "", "")
    assert got["babbler_neighbour_reach_ratio"] == {near: 0.75, far: 1}
    assert got["babbler_neighbour_cost"] == {near: 96, far: 32}
    assert got["babbler_neighbour_rtt_seconds"] == {near: 0.25 / 1000}
    assert got["babbler_routes_installed"] == {("ipv6",): 1, ("ipv4",): 1}
    assert got["babbler_nodes_known"] == {(): 2} and got["babbler_nodes_reachable"] == {(): 1}
    n2, n3 = ("n2", "000000000002"), ("", "000000000003")
    assert got["babbler_node_reachable"] == {n2: 1, n3: 0}
    assert got["babbler_node_hops"] == {n2: 1} and got["babbler_node_route_metric"] == {n2: 96}
    assert got["babbler_node_info_age_seconds"] == {n2: 1.5}
    assert got["babbler_node_info"] == {(*n2, "0.1.0"): 1}
    assert got["babbler_daemon_resident_memory_bytes"] == {(): 43204608}
    assert got["babbler_daemon_open_fds"] == {(): 17} and got["babbler_daemon_tasks"] == {(): 40}
    assert got["babbler_node_info_pushes_received_total"] == {(): 2}
    assert set(got) == {spec.name for spec in SPECS}  # the sample status shows every family


def test_without_a_status_only_babbler_up_0_is_shown() -> None:
    assert samples(families(None, STATS)) == {"babbler_up": {(): 0}}
    text = render(families(None, None)).decode()
    assert "babbler_up 0.0" in text and "babbler_info" not in text


def test_link_counters_absent_until_status_has_them_never_made_up() -> None:
    value = status()
    del value["interfaces"][0]["counters"]
    value["interfaces"][1]["counters"] = {"rx_bytes": None, "tx_bytes": -1, "rx_packets": "7"}
    got = samples(families(value, STATS))
    assert not any(name.startswith("babbler_link_receive") for name in got)
    assert not any(name.startswith("babbler_link_transmit") for name in got)


def test_names_follow_prometheus_conventions() -> None:
    for spec in SPECS:
        assert spec.name.startswith("babbler_") and spec.name == spec.name.lower(), spec
        assert spec.name.replace("_", "").isalnum() and spec.help, spec
        assert spec.name.endswith("_total") == (spec.kind == "counter"), spec
        assert all(label.replace("_", "").isalpha() for label in spec.labels), spec
    assert len({spec.name for spec in SPECS}) == len(SPECS)


def hostile_status() -> dict[str, Any]:
    """Every string a peer may choose made hostile; wrong types and duplicates besides."""
    value = status()
    value["name"] = EVIL
    value["nodes"][0]["name"] = EVIL
    value["nodes"][0]["version"] = EVIL
    value["interfaces"][0]["name"] = EVIL
    value["interfaces"].append(dict(value["interfaces"][0]))  # the same link twice
    value["interfaces"].append({"name": ["not", "text"], "mtu": 1500})
    value["neighbours"][0]["interface"] = EVIL
    value["kernel_problem"] = EVIL
    value["mesh"] = EVIL  # a state this version does not know
    value["clients"] = float("nan")
    value["babeld"] = {"pid": True, "restarts": float("inf")}
    value["nodes"].append({"node_id": "000000000004", "hops": "2", "info_age_s": 2**70})
    value["nodes"].append("not an object")
    value["routes"] = None
    return value


def test_hostile_values_are_escaped_or_left_out_never_a_crash() -> None:
    text = render(families(hostile_status(), {"rss_bytes": None, "tasks": "x", "open_fds": 3}))
    back = parsed(text)
    assert back["babbler_info"][(("babeld_version", ""), ("mode", "always"), ("node", EVIL_SHOWN),
                                 ("node_id", "1a2b3c4d5e6f"), ("platform", "linux"),
                                 ("version", "0.1.0"))] == 1  # fmt: skip
    assert back["babbler_link_mtu_bytes"] == {(("link", EVIL_SHOWN),): 9000}  # once, not twice
    assert back["babbler_problem_info"] == {(("kind", "kernel"), ("problem", EVIL_SHOWN)): 1}
    assert back["babbler_mesh_state"][(("state", EVIL_SHOWN),)] == 1
    assert back["babbler_node_reachable"][(("node", EVIL_SHOWN), ("node_id", "000000000002"))]
    assert "babbler_clients" not in back and "babbler_babeld_restarts_total" not in back
    assert back["babbler_babeld_up"] == {(): 0}  # a pid of `true` is no pid
    assert back["babbler_routes_installed"] == {(("family", "ipv6"),): 0, (("family", "ipv4"),): 0}
    assert back["babbler_daemon_open_fds"] == {(): 3}
    assert "babbler_daemon_tasks" not in back and "babbler_node_hops" in back
    assert ("node_id", "000000000004") not in {k for labels in back["babbler_node_hops"]
                                                for k in labels}  # fmt: skip
    lines = text.decode().splitlines()
    assert not any(line.startswith(("} evil", 'evil{x="1"}')) for line in lines)


def test_the_hostile_exposition_passes_promtool(tmp_path: Path) -> None:
    promtool = tool("promtool", "prometheus")
    text = render(families(hostile_status(), STATS))
    checked = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.data())
def test_any_shape_of_status_gives_an_exposition_that_parses(data: st.DataObject) -> None:
    """Any value at any key of a full status (and any stats): never a crash, and the text
    reads back with each family's samples, finite and non-negative counters."""
    value: Any = status()
    for _ in range(data.draw(st.integers(0, 6))):
        holder, key = _somewhere(value, data)
        holder[key] = data.draw(JSON)
    shown = families(value, data.draw(JSON | st.just(STATS)))
    back = parsed(render(shown))
    for family in shown:
        for _labels, number in family.samples:
            assert math.isfinite(number)
            assert family.spec.kind == "gauge" or number >= 0
    assert back["babbler_up"] == {(): 1}


def _somewhere(value: Any, data: st.DataObject) -> tuple[Any, Any]:
    """A (container, key) somewhere inside `value`, drawn."""
    holder, key = value, data.draw(st.sampled_from(sorted(value)))
    while isinstance(holder[key], dict | list) and holder[key] and data.draw(st.booleans()):
        holder = holder[key]
        keys = sorted(holder) if isinstance(holder, dict) else list(range(len(holder)))
        key = data.draw(st.sampled_from(keys))
    return holder, key


def test_importing_the_command_leaves_prometheus_client_unloaded() -> None:
    check = (
        "import sys, babbler.live.metrics, babbler.ctl.main;"
        "print(sorted(m for m in sys.modules if m.startswith('prometheus_client')))"
    )
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# -- writing the file (the writer itself: test_ctl_output.py) -------------------------------------


def test_metrics_o_to_a_missing_directory_says_so_in_one_line(tmp_path: Path) -> None:
    done = CliRunner().invoke(
        command, ["--socket", str(tmp_path / "none.sock"), "-o", "/nonexist/x.prom"]
    )
    assert done.exit_code == 1
    assert done.stderr == (
        "babblerctl: cannot write /nonexist/x.prom: no such directory /nonexist (make it first)\n"
    )


# -- against a socket -----------------------------------------------------------------------------


def test_metrics_prints_the_node_from_its_socket(
    fake_babblerd: tuple[Path, dict[str, Any]],
) -> None:
    path, answers = fake_babblerd
    answers |= {"status": json.dumps(status()), "stats": json.dumps(STATS)}
    done = CliRunner().invoke(command, ["--socket", str(path)])
    assert done.exit_code == 0, done.output
    back = parsed(done.stdout_bytes)
    assert back["babbler_link_receive_bytes_total"] == {(("link", "en2"),): 10}
    assert exposition(path) == done.stdout_bytes


def test_the_content_type_names_the_format_generate_latest_writes() -> None:
    from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

    assert CONTENT_TYPE == CONTENT_TYPE_PLAIN_0_0_4


def test_a_daemon_without_stats_is_shown_without_its_own_figures(
    fake_babblerd: tuple[Path, dict[str, Any]],
) -> None:
    path, answers = fake_babblerd
    answers["status"] = json.dumps(status())
    back = parsed(exposition(path))
    assert back["babbler_up"] == {(): 1} and "babbler_daemon_tasks" not in back


def test_no_babblerd_is_babbler_up_0_written_and_exit_1(tmp_path: Path) -> None:
    target = tmp_path / "babbler.prom"
    done = CliRunner().invoke(command, ["--socket", str(tmp_path / "none.sock"), "-o", str(target)])
    assert done.exit_code == 1
    assert done.stderr.startswith("babblerctl: babblerd is not running (no socket at ")
    assert done.stderr.endswith("(babbler_up 0 shown)\n") and done.stderr.count("\n") == 1
    assert parsed(target.read_bytes()) == {"babbler_up": {(): 0}}


def test_an_answer_that_is_not_a_status_is_babbler_up_0(
    fake_babblerd: tuple[Path, dict[str, Any]],
) -> None:
    path, answers = fake_babblerd
    for answer in ("[1, 2]", "not json", "null"):
        answers["status"] = answer
        done = CliRunner().invoke(command, ["--socket", str(path)])
        assert done.exit_code == 1 and parsed(done.stdout_bytes) == {"babbler_up": {(): 0}}
        assert done.stderr.count("\n") == 1, done.stderr
