"""What this host holds, read the same way by babblerd and `babblerctl doctor`: the links
from sysfs, the record of the kernel settings a babblerd changed; and files replaced whole
(whole.py), as babbler's state files, outputs and installed files are. Lean (standard
library and core only) and no daemon module: babblerctl imports it without the daemon."""
