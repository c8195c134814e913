"""Round eighteen's trial (not used): round fifteen's templates (``round15_a.py``, ``round15_notes.py``)
fitted at a weight of their own beside the shipped tuning rows, as round seventeen fitted its rows.

    python bench/memory_corpus/round18_trial.py WEIGHT   # 0: scored, never fitted on (needs numpy, scipy)

The rule, fixed before the first fit: the largest weight of 1, 0.5, 0.25 and 0.1 whose cross-validated
figure on the shipped tuning rows gives up at most half a point against 0, provided round fifteen's own
rows gain; none if no weight qualifies. Prints both figures (train.py's folds by template; round
fifteen's rows at the shipped rows' threshold). The results are in train.py's docstring.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import build
import numpy as np
import train
from round15_a import R15A
from round15_notes import R15_NOTES


def main() -> None:
    weight = float(sys.argv[1])
    rows = train.tuning_rows()
    shipped = len(rows)
    for templates, seed in ((R15A, 351), (R15_NOTES, 352)):
        rows += [
            (r["text"], r["kind"], r["template"], r["lang"])
            for r in build.round_three(templates, seed=seed)
            if r["obfuscation"] not in train.STRUCTURAL
        ]
    train._check_fresh({r[0] for r in rows})  # none of them is a held-out row
    plain = train.Data.__init__

    def weighed(self: train.Data, part: list[train.Row], vocab: dict[str, int]) -> None:
        plain(self, part, vocab)
        self.w = self.w * np.where([r[2].startswith("r15") for r in part], weight or 1.0, 1.0)
        self.w = self.w / self.w.sum()

    train.Data.__init__ = weighed  # type: ignore[method-assign]
    folds = [train._template_fold(r[2]) for r in rows]
    p, _, _ = train.out_of_fold(
        rows, folds, [{j for j in range(4) if j != k} for k in range(4)], fitted=None if weight else shipped
    )
    t = train.figure(rows[:shipped], p[:shipped], f"weight {weight}: shipped tuning rows")
    own = rows[shipped:]
    refused = p[shipped:] >= t + train._margin(own)
    judged, note = train._judged(own), np.array([r[1] == "note" for r in own])
    print(
        f"weight {weight}: round fifteen's rows at that threshold: {refused[judged & ~note].mean():.1%} of attacks "
        f"refused, {1 - refused[judged & note].mean():.1%} of notes kept"
    )


if __name__ == "__main__":
    main()
