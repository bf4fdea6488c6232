"""Bootstrap for the contract worker: python3 -B run.py {reference|candidate}."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from kbpworker.__main__ import main  # noqa: E402

sys.exit(main(sys.argv))
