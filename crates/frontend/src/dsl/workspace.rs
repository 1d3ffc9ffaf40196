//! `T.alloc_global`: a global buffer the kernel function allocates for itself.
//!
//! TileLang lowers a global allocation to a workspace: the runtime allocates it before the
//! launches and passes it to each as one more pointer, so one launch can leave partial results
//! there for the next (split-K decoding writes per-split partial outputs, a second launch combines
//! them). tilec models it the same way: a tensor parameter after the signature's, listed in
//! [`tilec_ir::World::workspaces`] so that what counts the function's own parameters skips it.

use tilec_ir::Scope;

use crate::builder::{Builder, Eval};
use crate::eval::Args;
use crate::value::Value;

impl Builder<'_> {
    /// `T.alloc_global(shape, dtype, scope="global")`.
    pub(super) fn alloc_global<'a>(&mut self, args: Args<'a>) -> Eval<Value<'a>> {
        let shape_value = self.required(&args, 0, "shape")?;
        let shape = self.shape_of(&shape_value, args.span_of(0, "shape"))?;
        for &extent in &shape {
            self.check_extent(
                extent,
                1,
                i64::MAX,
                args.span_of(0, "shape"),
                "a buffer extent",
            )?;
        }
        let dtype = self.dtype_arg(&args, 1, "dtype")?;
        let buffer = self.add_param(shape, dtype);
        debug_assert_eq!(self.world.scopes.get(buffer), Some(&Scope::Global));
        self.world.workspaces.push(buffer);
        Ok(Value::Buffer(buffer))
    }
}
