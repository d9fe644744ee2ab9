"""babbler: a zero-configuration IPv6 mesh over wired links, routed by babeld."""

__version__ = "0.1.0"
