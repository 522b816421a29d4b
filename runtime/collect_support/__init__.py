"""Pieces of collection (plan from the log, one episode, recordings on disk) kept small."""
