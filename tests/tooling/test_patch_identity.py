"""Every patch of every base carries the series' author and date.

A commit a rebase makes anew (a conflict resolved and committed by hand)
takes the local git identity and the time of day; exported, that would name
whoever rebased, not the series. The author and date are the series' own.
"""

from __future__ import annotations

import email.parser

AUTHOR = "trtllm_mla patch series <sglpatch@users.noreply.github.com>"
DATE = "Mon, 30 Nov 2026 12:00:00 +0000"


def test_every_patch_carries_the_series_identity():
    from sgltest import ROOT

    patches = sorted((ROOT / "patches").glob("*/*.patch"))
    assert patches
    for patch in patches:
        with patch.open("rb") as f:
            headers = email.parser.BytesHeaderParser().parse(f)
        where = f"{patch.parent.name}/{patch.name}"
        assert " ".join(str(headers["From"]).split()) == AUTHOR, where
        assert headers["Date"] == DATE, where
