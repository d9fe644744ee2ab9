"""Where babeld has no v4-via-v6 (macOS): a link is told to babeld only once its cable's
/31 is on it, at each appearance (a cable pulled and plugged back, into the same node or
another), a far end babeld never meets gives its /31 back, and a probe whose address never
came tells babeld at its deadline with nothing else happening (ipv4_service.py)."""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import replace
from ipaddress import IPv4Address, IPv6Address
from typing import Any

import pytest
import structlog

from babbler.core.links import AddressChange
from babbler.core.platform import MACOS
from babbler.daemon import ipv4_service
from tests.component.harness import eventually, running, veth
from tests.fakes.kernel import FakeKernel

# FAR: the neighbour the fake babeld lists on its first link (fake_babeld.py); OTHER: never
OWN, FAR, OTHER = IPv6Address("fe80::1"), IPv6Address("fe80::2"), IPv6Address("fe80::3")

Logs = list[MutableMapping[str, Any]]


def told(logs: Logs, name: str = "v1x3") -> list[int]:
    """Where in the log babeld was told of the link (launched on it, or it added)."""
    return [
        i
        for i, e in enumerate(logs)
        if (e["event"] == "starting babeld" and e["args"][-1] == name)
        or (e["event"] == "babeld interface added" and e["interface"] == name)
    ]


def cable_added(logs: Logs, name: str = "v1x3") -> list[int]:
    return [
        i
        for i, e in enumerate(logs)
        if e["event"] == "address added" and e["interface"] == name and "." in e["address"]
    ]


def v4(kernel: FakeKernel, name: str = "v1x3") -> set[str]:
    return {str(a.ip) for a in kernel.links[name].addresses_v4}


@pytest.fixture
def quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    """No pass every CLASH_RECHECK seconds: what the tests wait for must come by itself."""
    monkeypatch.setattr(ipv4_service, "CLASH_RECHECK", 3600.0)


async def test_a_cable_plugged_back_into_another_node_waits_for_its_new_address(
    quiet: None,
) -> None:
    """A Mac keeps a port up with no cable in it (`status: inactive`): babeld lets the link
    go, and when the cable comes back (here into another node) the far end is probed again
    and the new /31 is on the link before babeld is told of it again."""
    kernel = FakeKernel(veth("v1x3", 3))
    kernel.far["v1x3"] = (OWN, {FAR})
    kernel.far_delay = 0.5
    with structlog.testing.capture_logs() as logs:
        async with running(kernel, mode="always", platform=MACOS):
            await eventually(lambda: told(logs), what="v1x3 told to babeld")
            first = v4(kernel)
            kernel.set_link(replace(kernel.links["v1x3"], carrier=False))
            await eventually(
                lambda: any(e["event"] == "babeld interface removed" for e in logs),
                what="babeld lets a link without a far end go",
            )
            kernel.far["v1x3"] = (OWN, {OTHER})
            pulled = len(logs)
            kernel.set_link(replace(kernel.links["v1x3"], carrier=True))
            await eventually(lambda: len(told(logs)) == 2, what="v1x3 told again")
            second = v4(kernel) - first
    found = [
        (i, e["far"]) for i, e in enumerate(logs) if e["event"] == "far end found before babeld"
    ]
    assert [far for _, far in found] == [str(FAR), str(OTHER)]
    assert second, "the new far end's /31 was never added"
    again = told(logs)[1]
    assert any(pulled < i < again for i in cable_added(logs)), [e["event"] for e in logs[pulled:]]
    assert found[1][0] < again


async def test_a_far_end_babeld_never_meets_gives_its_address_back(
    quiet: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe finds a far end (a far Mac whose port is still in its bridge answers the
    echo) that babeld never lists as a neighbour: its /31 goes once the hold has passed."""
    monkeypatch.setattr(ipv4_service, "CABLE_HOLD", 1.0)
    kernel = FakeKernel(veth("v1x3", 3))
    kernel.far["v1x3"] = (OWN, {OTHER})  # the fake babeld meets FAR there, never OTHER
    with structlog.testing.capture_logs() as logs:
        async with running(kernel, mode="always", platform=MACOS):
            await eventually(lambda: cable_added(logs), what="the probe's /31")
            probes = logs[cable_added(logs)[0]]["address"]
            await eventually(lambda: probes not in v4(kernel), what="the /31 given back")


class DroppingKernel(FakeKernel):
    """Says yes to an IPv4 address and never shows it (a kernel that lost it)."""

    async def add_address(self, change: AddressChange) -> None:
        if not isinstance(change.address, IPv4Address):
            await super().add_address(change)


async def test_a_cable_whose_address_never_shows_is_told_at_the_deadline(quiet: None) -> None:
    """The far end is found, its /31 added and never seen: nothing else happens on the host,
    and babeld is told of the link at the probe's deadline all the same."""
    kernel = DroppingKernel(veth("v1x3", 3))
    kernel.far["v1x3"] = (OWN, {FAR})
    with structlog.testing.capture_logs() as logs:
        async with running(kernel, mode="always", platform=MACOS):
            await eventually(lambda: cable_added(logs), what="the /31 added")
            assert not told(logs)
            await eventually(lambda: told(logs), what="v1x3 told at the deadline")
