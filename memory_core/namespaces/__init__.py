"""A namespace's whole life: its counts, and its deletion leaving nothing of its text."""
