"""What changed between two lists of nodes, as `watch` names it (pure): a node `up` (newly
reachable), `down` (route lost, or gone from the list) or `changed` (name, metric, path or
info; ages, errors and hop counts aside). The daemon sends these as `watch` events; the
client library computes the same across a reconnect, from one snapshot to the next."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

IGNORED = ("info_age_s", "error", "hops", "route_lost_s", "last_seen_s")


def node_changes(
    before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]
) -> list[tuple[str, Mapping[str, Any]]]:
    """(action, node) for every node that came, went or changed, `after`'s order first; a
    node gone from the list is reported `down` as it last stood, marked unreachable."""

    def key(view: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in view.items() if k not in IGNORED}

    old = {n["node_id"]: n for n in before}
    new = {n["node_id"]: n for n in after}
    out: list[tuple[str, Mapping[str, Any]]] = []
    for node_id, view in new.items():
        was = old.get(node_id)
        if was is None or (view["reachable"] and not was["reachable"]):
            out.append(("up" if view["reachable"] else "down", view))
        elif was["reachable"] and not view["reachable"]:
            out.append(("down", view))
        elif key(was) != key(view):
            out.append(("changed", view))
    for node_id, view in old.items():
        if node_id not in new:
            out.append(("down", {**view, "reachable": False}))
    return out
