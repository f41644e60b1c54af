"""Trust: typed provenance, the instruction screen and tainted calls, called by every write path."""
