//! `T.view(buffer, shape, dtype=...)` with another dtype: a shared buffer over the same bytes.
//!
//! Kernels reuse a shared tile's memory for a result of another type once the tile is consumed
//! (DeepSeek's sparse MLA backward accumulates float32 `dKV` tiles in the bytes of its bf16 `KV`
//! tiles). tilec makes the view a shared buffer of its own — its shape, dtype and inferred layout —
//! listed in [`tilec_ir::World::byte_views`] with its base: the shared-memory plan places it at the
//! base's offset, liveness keeps the base live wherever the view is, and barriers order accesses
//! through either by their bytes. What the emulator cannot model is a value written through one
//! dtype and read through the other (reinterpreted bits); it reports such a read. Views of global,
//! fragment or local buffers with another dtype are not analysed yet.

use tilec_ir::{Code, DType, EntityId, EntityKind, ExprId, Scope};

use crate::builder::{Builder, Eval};
use crate::eval::Args;
use crate::value::Value;

impl Builder<'_> {
    /// `T.view(base, shape, dtype)` where `dtype` differs from `base`'s.
    pub(super) fn byte_view<'a>(
        &mut self,
        base: EntityId,
        dtype: DType,
        args: &Args<'a>,
    ) -> Eval<Value<'a>> {
        let scope = self.world.scopes.get(base).copied();
        if !scope.is_some_and(Scope::is_shared) {
            return Err(self.error(
                Code::NotAnalysed,
                args.span_of(2, "dtype"),
                format!(
                    "`T.view` to another dtype ({dtype}) of a buffer outside shared memory \
                     reinterprets its bytes, which tilec does not support yet"
                ),
            ));
        }
        let shape = match args.get(1, "shape") {
            None | Some(Value::None) => {
                return Err(self.error(
                    Code::InvalidCall,
                    args.span_of(2, "dtype"),
                    "`T.view` to another dtype needs the view's `shape`",
                ));
            }
            Some(_) => {
                let value = self.required(args, 1, "shape")?;
                self.shape_of(&value, args.span_of(1, "shape"))?
            }
        };
        self.check_view_bytes((base, dtype), &shape, args.span_of(1, "shape"))?;
        let view = self.add_kernel_entity(EntityKind::Buffer, "T.view", args.span)?;
        self.world.shapes.set(view, shape);
        self.world.dtypes.set(view, dtype);
        if let Some(scope) = scope {
            self.world.scopes.set(view, scope);
        }
        self.world.byte_views.set(view, base);
        Ok(Value::Buffer(view))
    }

    /// A view of another dtype must take as many bytes as its base, when both sizes are known.
    fn check_view_bytes(
        &mut self,
        (base, dtype): (EntityId, DType),
        shape: &[ExprId],
        span: tilec_ir::Span,
    ) -> Eval<()> {
        let count = |builder: &Self, dims: &[ExprId]| -> Option<u64> {
            dims.iter()
                .map(|&d| {
                    builder
                        .world
                        .exprs
                        .as_int(d)
                        .and_then(|d| u64::try_from(d).ok())
                })
                .try_fold(1u64, |acc, d| acc.checked_mul(d?))
        };
        let base_shape = self.world.shapes.get(base).cloned().unwrap_or_default();
        let base_dtype = self.world.dtypes.get(base).copied();
        let (Some(new), Some(old), Some(base_dtype)) =
            (count(self, shape), count(self, &base_shape), base_dtype)
        else {
            return Ok(());
        };
        let (new_bytes, old_bytes) = (dtype.storage_bytes(new), base_dtype.storage_bytes(old));
        if new_bytes == old_bytes {
            return Ok(());
        }
        Err(self.error(
            Code::ShapeMismatch,
            span,
            format!(
                "`T.view` to {new} {dtype} elements ({new_bytes} bytes) of `{}`, {old} \
                 {base_dtype} elements ({old_bytes} bytes): a view must take exactly its \
                 buffer's bytes",
                self.world.name(base)
            ),
        ))
    }
}
