"""`python -m lazyxla.opinfo`: the package's docstring says what it runs."""
import sys

from .report import main

sys.exit(main())
