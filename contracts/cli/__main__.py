"""`python -m contracts.cli`: the same command as `spark-contracts`."""

import sys

from contracts.cli import main

sys.exit(main())
