"""Cards: writing drafts with their evidence, listing, and querying by task state."""
