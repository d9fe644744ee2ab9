"""The pure core every program shares: address math, the settings table, babeld's lines and
the mesh table built from them, the views clients read, the graph of machines, link costs.
No module here does I/O or imports trio; each has unit tests (docs/design.md, module map)."""
