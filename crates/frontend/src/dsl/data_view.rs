//! `T.Tensor(shape, dtype, buf.data)`: another buffer over the storage of `buf`.
//!
//! TileLang declares a buffer whose data pointer is `buf`'s, so the same elements are addressed
//! with another shape (a convolution's `(KH, KW, C, F)` filter read as the `(KH * KW * C, F)`
//! matrix a gemm takes). That is what `T.reshape` gives, and tilec makes the same alias; a view
//! that would read the bytes as another dtype is refused, as `T.view` to another dtype is.

use tilec_ir::{Code, EntityId, EntityKind};

use crate::builder::{Builder, Eval};
use crate::eval::Args;
use crate::value::Value;

impl Builder<'_> {
    pub(super) fn view_of_data<'a>(&mut self, base: EntityId, args: &Args<'a>) -> Eval<Value<'a>> {
        let what = "`T.Tensor(shape, dtype, data)`";
        let shape_value = self.required(args, 0, "shape")?;
        let shape = self.shape_of(&shape_value, args.span_of(0, "shape"))?;
        let base_dtype = self.world.dtypes.get(base).copied();
        if let Some(Value::DType(_) | Value::Str(_)) = args.get(1, "dtype") {
            let dtype = self.dtype_arg(args, 1, "dtype")?;
            if Some(dtype) != base_dtype {
                return Err(self.error(
                    Code::NotAnalysed,
                    args.span_of(1, "dtype"),
                    format!(
                        "{what} as {dtype} over a buffer of another dtype reinterprets bytes, which tilec does not support yet"
                    ),
                ));
            }
        }
        self.check_alias_size(what, base, &shape, args.span_of(0, "shape"))?;
        // A view of a tensor parameter may be made before `with T.Kernel(...)`, at the top of
        // the prim_func, as TileLang allows (`x_flat = T.Tensor((n, c, h * w), dtype, x.data)`):
        // like the parameter, it then belongs to no launch.
        let global = self.world.scopes.get(base) == Some(&tilec_ir::Scope::Global);
        let alias = if self.block.is_none() && global {
            self.add_entity(EntityKind::Buffer)
        } else {
            self.add_kernel_entity(EntityKind::Buffer, what, args.span)?
        };
        self.world.shapes.set(alias, shape);
        if let Some(dtype) = base_dtype {
            self.world.dtypes.set(alias, dtype);
        }
        if let Some(&scope) = self.world.scopes.get(base) {
            self.world.scopes.set(alias, scope);
        }
        self.world.aliases.set(alias, base);
        Ok(Value::Buffer(alias))
    }
}
