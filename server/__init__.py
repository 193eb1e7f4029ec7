"""User-facing front ends over the agent and the evaluator: the `geak` command line (``cli``), the language server
the editor talks to (``lsp``) and the warm evaluator service the commands use (``service``)."""
