"""Operator tools that act on a stack's state rather than on its resources; standard library only."""
