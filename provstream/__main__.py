import sys

from provstream.cli import main

if __name__ == "__main__":  # not in a process multiprocessing spawns (it imports this module as __mp_main__)
    sys.exit(main())
