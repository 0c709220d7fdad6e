"""Where reproducers, corpus tools and users find the Case record: ``diagfuzz.core.case``."""

from diagfuzz.core.case import *  # noqa: F403
from diagfuzz.core.case import __all__  # noqa: F401  (what the star import gives)
