"""`babblerctl`, the user-side tool: `main` (the click commands) over the client library."""
