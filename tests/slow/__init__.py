"""Longer tests: real servers started by the test (``langgraph dev``) and fault injection."""
