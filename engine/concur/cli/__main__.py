"""``python -m concur.cli``: the same as the ``concur`` command."""

from . import main

main()
