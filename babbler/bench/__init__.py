"""The link bench over the mesh (docs/bench.md): `babblerctl bench` measures round trips
and TCP throughput to other nodes, whose babblerd runs a responder on its node address.

Modules: `wire` (pure: requests, limits, sizes), `responder` (the responder program, an
unprivileged process of its own; babblerd starts and restarts it: daemon/responder.py),
`runner` (the measuring side), `report` (pure: tables, JSON, the picture).
"""
