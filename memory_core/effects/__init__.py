"""Does a card help? The holdout withholds matching cards from a small random share of
queries; outcomes reported for those queries count for the served and the withheld arm, and
the difference in success rate, with its interval, is the card's measured effect.

Imports neither Prefect nor FastAPI; the submodules are imported where needed (the card
model imports `estimate`, so this package imports nothing at load)."""
