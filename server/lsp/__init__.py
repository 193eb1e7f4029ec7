"""The language server: its composition root (``server``), the state it owns (``state``: documents, settings, trust,
the engine thread and the managers of checks, optimize sessions and diagnostics) and one module per editor feature
(``features``)."""
