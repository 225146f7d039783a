"""Integrations with other frameworks; each is an optional extra and imports nothing by default."""
