"""Decay, outcome feedback and the archive: unused knowledge fades, failing knowledge goes to
review, the served set stays under its cap, and cold cards wait, restorable, in the archive."""

from memory_core.decay.archive import ArchiveEntry, list_archive, restore
from memory_core.decay.feedback import Feedback, record_feedback, record_use
from memory_core.decay.params import Change, DecayParams, DecayReport
from memory_core.decay.stage import run_decay

__all__ = [
    "ArchiveEntry",
    "Change",
    "DecayParams",
    "DecayReport",
    "Feedback",
    "list_archive",
    "record_feedback",
    "record_use",
    "restore",
    "run_decay",
]
