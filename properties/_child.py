"""``python -m properties._child CONFIG RFD WFD``: one worker process (``spawn="exec"``).

Started by :class:`properties.pilots.ProcessPilot`; talks JSON lines over the two
inherited pipe descriptors and ends with ``os._exit`` like the forked child does.
"""

from __future__ import annotations

import json
import os
import signal
import sys

from .process_pilot import _Channel, child_main


def main(argv: list[str]) -> None:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)  # as a service runs, whoever started us
    config = json.loads(argv[1])
    code = 70
    try:
        code = child_main(config, _Channel(int(argv[2]), int(argv[3])))
    finally:
        sys.stderr.flush()
        os._exit(code)


if __name__ == "__main__":
    main(sys.argv)
