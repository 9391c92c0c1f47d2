"""``python -m concur``: the same as the ``concur`` command."""

from .cli import main

main()
