//! The question whether an analysis is still wanted, asked by every long computation.
//!
//! The database answers it (salsa's `unwind_if_revision_cancelled`, which unwinds when an edit has
//! made the result stale), so this crate only carries the probe: the evaluator, layout inference
//! and lowering call [`Cancellation::check`] every so often, and an edit in the editor never waits
//! for a long analysis of the text it replaced.

/// A probe that unwinds when the analysis is no longer wanted. The default asks nothing, for
/// callers outside a database (tests, one-shot tools).
#[derive(Clone, Copy, Default)]
pub struct Cancellation<'c>(Option<&'c dyn Fn()>);

impl<'c> Cancellation<'c> {
    /// A cancellation that asks `probe`, which unwinds when the work is no longer wanted.
    pub fn new(probe: &'c dyn Fn()) -> Cancellation<'c> {
        Cancellation(Some(probe))
    }

    /// Asks whether the work is still wanted; unwinds (through the probe) when it is not.
    pub fn check(self) {
        if let Some(probe) = self.0 {
            probe();
        }
    }
}

impl std::fmt::Debug for Cancellation<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Cancellation(asks)"
        } else {
            "Cancellation(never)"
        })
    }
}
