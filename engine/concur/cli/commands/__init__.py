"""CLI sub-commands, one module each, loaded only when invoked.

Each module here defines ``command`` (a ``click.Command``; ``bench`` a group). ``concur.cli``
names them in ``COMMANDS`` for its :class:`concur.cli.lazy.LazyGroup`, so ``concur solve``
imports only ``solve``'s module and ``concur --help`` imports only click. A command imports
the shared pieces from the modules beside ``concur.cli`` (``givens``, ``render``, ``streams``,
``options``...), never from ``concur.cli`` itself.
"""
