"""User-facing front ends: the `geak` command line (``cli*.py``) and the language server (``lsp_server``, which wires
one module per feature over the server's state, ``state``)."""
