"""``python -m kafkalog_spark.cli`` (entry-point layer): run the ``kafkalog`` command."""

import sys

from . import main

sys.exit(main())
