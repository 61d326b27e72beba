"""The ``arag`` command line, on top of everything (evaluation included)."""
