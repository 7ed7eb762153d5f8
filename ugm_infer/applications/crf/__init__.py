"""Conditional random fields: learners of the conditional likelihood from (x, y) pairs."""
