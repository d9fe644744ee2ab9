"""babeld, as babblerd runs it: `launch` (its files, `-c` text and command line), `process`
(a babeld left behind: stale pid file and socket), `session` (one babeld lifetime: spawn,
connect, follow, why it ended), `control` (the control connection: greeting, requests,
table lines), `reader` (the thread that reads it, repeats dropped at the door), `sndbuf`
(a larger send buffer on babeld's end). Its lines are parsed in core/babeld_lines.py."""
