"""babblerctl's live views of the mesh: `top` (a terminal), `web` (a page), `metrics`
(Prometheus's text format). Each module defines its click command and imports its heavy
library (rich, starlette and hypercorn, prometheus_client) only when the command runs."""
