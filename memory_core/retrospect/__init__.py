"""Retrospection: claim pending trajectories, extract card drafts, write them with the claim."""
