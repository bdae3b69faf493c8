"""A first look at a whole batch of frames for the loader's bulk path (recorder/bulk.py): False
when no redaction rule can change any frame of it, nor the joined text of the pieces streamed in
it, so the batch is stored without a Python object per frame. True sends the batch through the
full rules, frame by frame (recorder/redact.py stays the one definition).

Each look here lets through every frame a rule can change (docs/design.md, "Redaction"): the
same prefilter, token-shape anchors and words as `Redactor._may_match`, and the base64 rule's
own test, run once over the batch (frames joined by newlines, which no rule matches across).
The bulk path takes frames up to 16 KiB only, which `_may_match` clears by its prefilter.
"""

from __future__ import annotations

from . import redact as _r
from .redact import Redactor

_WORDS = tuple(w.pattern for w in _r._GATE_WORDS)


def may_change(redactor: Redactor, batch: bytes) -> bool:
    if not redactor.enabled or not batch:
        return False
    # configured paths and patterns: the rules run frame by frame
    if not redactor._fast:
        return True
    # pieces of secrets replaced earlier, next to an ellipsis (the fragments rule; no window
    # holds a newline, so none is found across two frames)
    if redactor._windows and redactor._fragments(batch) is not batch:
        return True
    low = batch.lower()
    # the words any context rule needs (literal searches, ~0.3 ms a MiB each) before the
    # prefilter (~20 ms a MiB): a batch with none of them is cleared without it
    if any(w in low for w in _WORDS) and _r._PREFILTER.search(low) is not None:
        return True
    if _r._may_hold_shape(batch):
        return True
    if b"ASIA" in batch or (b"@" in batch and b"://" in batch):
        return True
    if redactor._extra and any(k in low for k in redactor._extra):
        return True
    if redactor._literal_list and redactor._has_literal(batch):
        return True
    return redactor._base64(batch) is not batch
