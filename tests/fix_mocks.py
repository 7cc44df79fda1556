"""Mock remote fixtures (filled in by the mock work)."""
