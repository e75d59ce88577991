import sys

from lobreplay.cli.main import main

sys.exit(main())
