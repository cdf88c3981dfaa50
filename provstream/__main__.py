import sys

from provstream.cli import main

sys.exit(main())
