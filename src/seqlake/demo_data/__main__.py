"""``python -m seqlake.demo_data [DIR]``: make the demo reads again (into this package's folder by default)."""

import sys
from pathlib import Path

from seqlake.demo_data import simulate, simulate_args

if __name__ == "__main__":
    sys.exit(simulate.main(simulate_args(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent)))
