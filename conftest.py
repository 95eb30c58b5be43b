"""Root conftest: its presence puts the repository root on sys.path (pytest's rootdir conftest), so
`tests._support` imports. The fixtures (`stack`, `run_experiment`, `summary`, `extra_gateway`) come from the
installed plugin (chaos.pytest_plugin loads chaos.fixtures), as they do in a team's own repository."""
