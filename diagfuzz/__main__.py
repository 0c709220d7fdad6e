"""``python -m diagfuzz``: the ``diagfuzz`` command (``diagfuzz.gate.cli``)."""

import sys

from diagfuzz.gate.cli import main

sys.exit(main())
