"""glassloop: a terminal agent REPL whose loop you can see through."""

__version__ = "0.1.0"
