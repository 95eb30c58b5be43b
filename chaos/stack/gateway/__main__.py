"""`python -m chaos.stack.gateway ARGS` is `chaos gateway ARGS` (the embedded launcher uses it)."""
import sys

from chaos.cli import main

sys.exit(main(["gateway", *sys.argv[1:]]))
