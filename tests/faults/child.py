"""Entry point of a fresh-interpreter child (:func:`faults.run_script`):
``python -m faults.child module:function kwargs_json report_fd ack_fd blocking fsize``."""

from __future__ import annotations

import importlib
import json
import os
import sys

from faults import child_body


def main(argv: list[str]) -> int:
    target, kwargs, report_fd, ack_fd, blocking, fsize = argv
    module, _, name = target.partition(":")
    fn = getattr(importlib.import_module(module), name)
    return child_body(fn, json.loads(kwargs), int(report_fd), int(ack_fd), blocking == "1",
                      int(fsize) if fsize else None)


if __name__ == "__main__":
    status = main(sys.argv[1:])
    sys.stdout.flush()
    os._exit(status)
