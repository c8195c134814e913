"""``python -m tether.cli`` is the ``tether`` command too."""

import sys

from tether.cli import main

sys.exit(main())
