"""The names this module held before the frame model and the classifier got a module each
(`model.py`, `classify.py`); kept so that code importing them from here goes on working."""

from __future__ import annotations

from .classify import PAYLOAD_MAX, VERSION_WINDOW, Classifier, Extracted, classify
from .model import COLUMNS, DIRECTIONS, Frame, wall_ts

__all__ = ["COLUMNS", "DIRECTIONS", "PAYLOAD_MAX", "VERSION_WINDOW", "Classifier", "Extracted",
           "Frame", "classify", "wall_ts"]
