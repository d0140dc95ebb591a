import sys

from seqlake.cli import main

sys.exit(main())
