"""What the user-side tools (`babblerctl`, `babbler-lab`) show people: `render` (pure:
tables, status, nodes, paths, one node resolver) and `command` (one-line errors and exit
codes, pictures drawn with Graphviz)."""
