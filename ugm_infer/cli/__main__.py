"""``python -m ugm_infer.cli``: the ``ugm-infer`` command."""

import sys

from ugm_infer.cli import main

sys.exit(main())
