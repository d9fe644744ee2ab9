"""The kernel's links, as the daemon reads and changes them: `kernel` (the protocol),
`linux` (netlink), `darwin` (PF_ROUTE and commands), `sysfs` (Linux facts without netlink,
the early start's view), `events` (the trigger socket), `backend` (which one runs). The
pure model is core/links.py."""
