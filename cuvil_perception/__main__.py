"""``python -m cuvil_perception`` is the command line."""

from .cli import main

main()
