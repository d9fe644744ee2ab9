"""Network links: the pure model (`model`) and the platform backends that fill it."""
