import sys

from fairshare.cli import main

sys.exit(main())
