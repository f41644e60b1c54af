"""The `hindsight` command line."""
