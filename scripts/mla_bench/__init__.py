"""EAGLE metadata benchmark: base vs patched trees of SGLang's trtllm_mla backend.

- ``config``: the flags and their defaults (the seed PR's setup).
- ``worker``: measures one tree in its own process (``MEASUREMENTS``: what, per phase).
- ``report``: comparison table, JSON, chart.
- ``ladder``: per-patch trees (``--ladder``), from sglpatch's build tree.
- ``__main__``: runs both trees and reports.
"""

from sglpatch.pyversion import check as _check

_check("make bench")  # an older Python gets one line, before anything needs 3.11
