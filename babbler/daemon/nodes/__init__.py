"""The node info service (DESIGN.md "Node info over the mesh"): `book` (pure: the other
nodes, when to ask them), `answer` (pure: this node's answer, who may ask), `server` (the
listener on the node address), `ask` (asking another node), `service` (all of it, started
by the daemon)."""
