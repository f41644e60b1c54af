"""The serving gate: a lesson is served only when runs of several tasks support it (or an
operator wrote or approved it) and its warnings were mostly right on later runs."""
