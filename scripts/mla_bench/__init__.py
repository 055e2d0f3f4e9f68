"""EAGLE metadata benchmark: base vs patched trees of SGLang's trtllm_mla backend.

- ``config``: the flags and their defaults (the seed PR's setup).
- ``worker``: measures one tree in its own process.
- ``report``: comparison table, JSON, chart.
- ``__main__``: runs both trees and reports.
"""
