//! The daemon's integration tests, folded into one test binary (as rust-analyzer's and ty's are):
//! each module was its own binary before, and each binary linked the whole workspace again. The
//! modules drive the real `tilec` binary (`CARGO_BIN_EXE_tilec`) end to end.

mod build;
mod cli;
mod common;
mod fuzz_regressions;
mod lsp;
mod realworld_lowering;
mod remote_cache;
mod run;
mod tensor_core;
mod tune;
mod watch;
