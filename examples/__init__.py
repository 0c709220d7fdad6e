"""Example implementations to fuzz with diagfuzz: plain PyTorch, torch.compile, FlagGems.

Not part of the installed package. Each module is an implementation for ``--impl``
(``--impl=examples.NAME:impl`` from the repository root); its docstring gives the command.
What runs found is in ``docs/findings.md``.
"""
