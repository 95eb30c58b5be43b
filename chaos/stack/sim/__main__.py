"""`python -m chaos.stack.sim`."""
import sys

from chaos.stack.sim.cli import main

sys.exit(main())
