"""``python -m ctxwise.cli``: the command line (:func:`ctxwise.cli.main`)."""

from . import main

main()
