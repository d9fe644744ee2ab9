"""babblerd, the root daemon: its entry (`cli`, lean until babeld is spawned), the wiring
and lifecycle (`lifecycle`), the mesh supervisor (`mesh`), identity, child processes, the
public socket (`server`, `requests`, `fanout`) and its rooms: `links/` (the kernel),
`babeld/` (babeld's process and control socket), `nodes/` (the node info service).
Kept empty of imports: `babblerd` starts babeld before trio is imported."""
