"""Tests of the crashresume harness."""
