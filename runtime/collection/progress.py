"""The collection's progress bar (stderr, only on a terminal)."""

from __future__ import annotations

import sys
from typing import Any

from runtime.collection.plan import CollectionPlan


def progress_bar(plan: CollectionPlan, enabled: bool) -> Any:
    from tqdm import tqdm

    total = len(plan.batches) * plan.episodes_per_batch
    accepted, attempted = plan.totals()
    bar = tqdm(
        total=total,
        initial=attempted,
        unit="ep",
        desc=f"collect {plan.run_id}",
        file=sys.stderr,
        disable=not enabled or not sys.stderr.isatty(),
        dynamic_ncols=True,
    )
    bar.set_postfix(batch=f"-/{len(plan.batches)}", accepted=accepted, refresh=False)
    return bar
