"""The warm evaluator service: a process that keeps an evaluator warm for `geak check` and `geak bench`
(``server``), the commands' side of it (``client``), and what both agree on (``protocol``)."""
