"""The editor's features, one module each, registered over the server's state by ``lsp.server``: diagnostics, inlay
hints, hover, code actions, Optimize, and files changed on disk."""
