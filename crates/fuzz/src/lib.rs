//! A mutation fuzzer for the `tilec` command line.
//!
//! It mutates TileLang files (the project's corpus and TileLang's own examples) the way a user's
//! editing does and the way that breaks size assumptions, runs `tilec check`, `layout`, `build` and
//! `run` on each mutant in its own process under a time and a memory limit, and reports every
//! panic, abort and hang with the mutant that caused it. CI runs it for a bounded number of mutants
//! (`.ci/run`); every crash it found is kept in `regressions/` and replayed by the daemon's tests.
//!
//! Invariants: a mutant is a function of the run's seed, the command and its index alone, so any
//! failure is reproduced by its seed; the fuzzer never needs a GPU (it hides them from `tilec`);
//! it depends on no tilec crate, only on the binary it is given.

pub mod mutate;
pub mod target;
