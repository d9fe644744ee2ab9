"""babblerd as a system service, installed, upgraded and removed in one command each:
`command` (the subcommands), `plan` (pure: what to write, what differs), `program` (the
program a service may run), `systemd` (Linux), `launchd` (macOS); the shipped unit,
sysusers file and plist in `files/`."""
