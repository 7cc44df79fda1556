"""Agents written with agent_runtime's public API, to read and to copy."""
