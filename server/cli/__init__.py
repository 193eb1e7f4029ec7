"""The `geak` command line: the entry point (``entry``), a module per command (``check``, ``bench``, ``optimize``,
``serve``, ``run``, ``eval``, ``service``), the evaluation options they share (``evaluation``) and the renderers."""

from .entry import main

__all__ = ["main"]
