"""Where reproducers, corpus tools and users find the Case record (``diagfuzz.core.case``)
and the arguments of its op call (``call_arguments``: ``diagfuzz.specs.arguments``)."""

from diagfuzz.core.case import *  # noqa: F403
from diagfuzz.core.case import __all__ as _CASE_NAMES
from diagfuzz.specs import arguments as call_arguments

__all__ = [*_CASE_NAMES, "call_arguments"]
