"""Facts: key / query / value statements, kept current by the newest statement."""
