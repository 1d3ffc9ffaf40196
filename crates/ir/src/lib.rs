//! The kernel world: the position-free IR of one kernel instance, as entities and component columns.
//!
//! A kernel instance (a factory plus concrete meta arguments) becomes one [`World`]. Entities are small
//! integer ids assigned in source order; components are typed columns keyed by entity. Integer index
//! expressions live in an interned [`expr::ExprArena`], runtime (data) expressions in a
//! [`data::DataArena`].
//!
//! Invariants of this crate:
//! - It never does I/O and knows nothing about salsa, files, Python syntax or CUDA.
//! - Everything a pass reads is `Eq` and position-free: no byte offsets or line numbers live in a
//!   [`World`]. Source positions are kept beside it, in a [`SpanTable`] keyed by the same entity ids.
//! - Nothing here panics on any input; evaluation returns `None` where Python would raise.

pub mod cancel;
pub mod data;
pub mod diagnostic;
pub mod dtype;
pub mod expr;
mod print;
pub mod program;
pub mod span;
pub mod target;
pub mod thread;
pub mod value;
pub mod visit;
pub mod world;

pub use cancel::Cancellation;
pub use data::{DataArena, DataExpr, DataId, Intrinsic};
pub use diagnostic::{Anchor, Code, Diagnostic, Related, Severity};
pub use dtype::DType;
pub use expr::{Expr, ExprArena, ExprId, VarId};
pub use program::{BatchOutputs, ExprProgram};
pub use span::{Span, SpanTable};
pub use target::Target;
pub use thread::ThreadProgram;
pub use value::ConstValue;
pub use world::*;
