"""CLI sub-commands, one module each, loaded only when invoked.

Each module here defines ``command`` (a ``click.Command``).  ``concur.cli``
lists them in ``COMMANDS`` so that ``concur --help`` never imports sympy,
openpyxl or matplotlib.
"""
