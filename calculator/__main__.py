import sys

from calculator.cli.main import main

sys.exit(main())
