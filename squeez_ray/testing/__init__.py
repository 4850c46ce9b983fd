"""Test helpers that ship with the package (tiny local checkpoints); nothing here downloads."""
