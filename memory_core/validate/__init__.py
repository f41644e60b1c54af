"""Validation: a Great Expectations gate over each batch of draft cards."""
