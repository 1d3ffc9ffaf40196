//! The tilec language server (tower-lsp-server): document store, snapshots, requests and custom commands.
