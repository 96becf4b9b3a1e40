import sys

from .differential import main

sys.exit(main())
