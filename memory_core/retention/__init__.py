"""A namespace's retention: how long its raw runs and uses are kept, and the nightly stage
that removes what is older."""
