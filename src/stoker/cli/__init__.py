"""The ``stoker`` command: parses arguments, calls the public API, returns an exit code.

One module per command (``main.py`` lists them); the file map is in ``src/stoker/README.md``.
"""
