"""The example project: a shop whose orders are billed by a JetStream worker."""
