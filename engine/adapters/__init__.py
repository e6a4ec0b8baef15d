"""Adapters: outside formats turned into events (write side; never imports projections)."""
