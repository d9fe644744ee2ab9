"""babeld: its line protocol (`protocol`), the process (`process`) and its control socket
(`control`)."""
