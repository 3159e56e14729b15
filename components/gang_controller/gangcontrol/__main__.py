"""`python -m gangcontrol`: run until SIGTERM."""

from .run import main

main()
