"""`python -m fairshare`: a short-lived process, run without the cyclic garbage collector.

A plan of 100,000 queues allocates a million objects that live until the process ends and hold
no reference cycles; every collection would walk them all again (a third of the run, measured
with `benchmarks.planner`), and none would free anything: reference counting frees what dies.
"""

import gc
import sys

from fairshare.cli import main

gc.disable()
sys.exit(main())
