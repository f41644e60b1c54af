"""Hindsight for agents: `hindsight.client` talks to a running Hindsight API."""
