//! `T.make_tensor(ptr, shape, dtype)`: a global tensor at an address the kernel reads at run time.
//!
//! Grouped GEMMs over tensors of different sizes pass a table of device pointers (`T.Tensor([G],
//! T.ptr)`) and make each group's tensor from its entry inside the kernel. tilec models such a
//! tensor as one more global tensor parameter of the given shape and dtype (as `T.alloc_global`'s
//! workspaces are), listed in [`tilec_ir::World::pointer_tensors`] with the pointer's value: checks
//! and layout inference treat it as any global tensor, and the lowering, which would have to read
//! the pointer at run time, reports it as not analysed.

use tilec_ir::Scope;

use crate::builder::{Builder, Eval};
use crate::eval::Args;
use crate::value::Value;

impl Builder<'_> {
    /// `T.make_tensor(ptr, shape, dtype="float32", strides=None)`.
    pub(super) fn make_tensor<'a>(&mut self, args: Args<'a>) -> Eval<Value<'a>> {
        let pointer = self.required(&args, 0, "ptr")?;
        let (pointer, _) = self.data_expr(&pointer, args.span_of(0, "ptr"))?;
        let shape_value = self.required(&args, 1, "shape")?;
        let shape = self.shape_of(&shape_value, args.span_of(1, "shape"))?;
        for &extent in &shape {
            self.check_extent(
                extent,
                1,
                i64::MAX,
                args.span_of(1, "shape"),
                "a tensor extent",
            )?;
        }
        let dtype = match args.get(2, "dtype") {
            None => tilec_ir::DType::Float32,
            Some(_) => self.dtype_arg(&args, 2, "dtype")?,
        };
        let tensor = self.add_param(shape, dtype);
        debug_assert_eq!(self.world.scopes.get(tensor), Some(&Scope::Global));
        self.world.pointer_tensors.set(tensor, pointer);
        Ok(Value::Buffer(tensor))
    }
}
