"""The ``stoker`` command: parses arguments, calls the public API, returns an exit code.

Files:
    main.py     the entry point and the list of commands
    output.py   printing helpers (rich tables, sizes)
    flags.py    library error messages in flag words (--overwrite, not overwrite=True)
    helptext.py reST markup taken out of every --help
    inspect.py  stoker inspect STORE [--verify] [--json]
    convert.py  stoker convert KIND ...: one module per kind registers itself here
    demo.py     stoker demo: the README's main job (sections: demo_mnist.py, ...)
"""
