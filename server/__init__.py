"""User-facing front ends: the `geak` command line (and, next, the language server)."""
