"""Compute node ↔ storage node transport over Arrow Flight: message framing and the client."""
