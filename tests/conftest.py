"""Shared set-up for the harness's own tests."""
pytest_plugins = ["pytester"]
