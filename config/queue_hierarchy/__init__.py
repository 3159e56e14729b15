"""QueueHierarchy's settings (`queues`): each KAI Queue, and the checks on the tree as a whole.

The fair-share planner (fairshare/) reads the same models, so the plan is of exactly
the tree the stack creates.
"""
