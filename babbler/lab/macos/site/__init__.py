"""Put on a macOS lab node's PYTHONPATH (not imported as a package): `netifaces` there stands
in for the netifaces babblerd reads on a Mac."""
