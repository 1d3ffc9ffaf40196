//! `T.any_of(region)` and `T.all_of(region)`: whether any (every) element of a small region is
//! non-zero, as one boolean value.
//!
//! TileLang unrolls the test over the region's elements (`mask[0] || mask[1] || ...`), and so does
//! tilec: the result is an ordinary data expression of loads joined by `or` / `and`, which every
//! later pass (checks, layout inference, lowering, the emulator) already understands. The region
//! must have extents known at compile time, and at most [`MAX_ELEMENTS`] elements.

use tilec_ir::data::{BinaryOp, CompareOp};
use tilec_ir::{Code, DType, DataExpr, ExprId};

use crate::builder::{Builder, Eval};
use crate::eval::Args;
use crate::value::Value;

/// The most elements `T.any_of` / `T.all_of` unrolls over.
const MAX_ELEMENTS: i64 = 1024;

impl Builder<'_> {
    /// `T.any_of(buffer)` (`any` true) or `T.all_of(buffer)`.
    pub(super) fn any_or_all_of<'a>(&mut self, name: &str, args: Args<'a>) -> Eval<Value<'a>> {
        let region = self.region_arg(&args, 0, "buffer")?;
        let span = args.span_of(0, "buffer");
        let mut extents = Vec::with_capacity(region.dims.len());
        for dim in &region.dims {
            let extent = match dim.extent {
                None => 1,
                Some(extent) => self.world.exprs.as_int(extent).ok_or_else(|| {
                    self.error(
                        Code::NotAnalysed,
                        span,
                        format!(
                            "`T.{name}` over a region whose extents are known only at run time: \
                             tilec unrolls it over the elements, as TileLang does"
                        ),
                    )
                })?,
            };
            extents.push(extent);
        }
        let count = extents
            .iter()
            .try_fold(1i64, |n, &e| n.checked_mul(e.max(0)));
        let count = match count {
            Some(count) if count <= MAX_ELEMENTS => count,
            _ => {
                return Err(self.error(
                    Code::NotAnalysed,
                    span,
                    format!(
                        "`T.{name}` over more than {MAX_ELEMENTS} elements: tilec unrolls it over \
                         the elements, as TileLang does, up to that many"
                    ),
                ));
            }
        };
        let (join, empty) = if name == "any_of" {
            (BinaryOp::Or, 0)
        } else {
            (BinaryOp::And, 1)
        };
        let mut result = None;
        for flat in 0..count {
            let indices = self.element_indices(&region.dims, &extents, flat);
            let load = self.world.data.push(DataExpr::Load {
                buffer: region.buffer,
                indices,
            });
            let zero = self.world.data.push(DataExpr::Int {
                value: 0,
                dtype: None,
            });
            let set = self.world.data.push(DataExpr::Compare {
                op: CompareOp::Ne,
                lhs: load,
                rhs: zero,
            });
            result = Some(match result {
                None => set,
                Some(previous) => self.world.data.push(DataExpr::Binary {
                    op: join,
                    lhs: previous,
                    rhs: set,
                }),
            });
        }
        let node = match result {
            Some(id) => {
                return Ok(Value::Data {
                    id,
                    dtype: Some(DType::Bool),
                });
            }
            // An empty region: no element is set, and every one (of none) is.
            None => DataExpr::Int {
                value: empty,
                dtype: Some(DType::Bool),
            },
        };
        Ok(self.data(node, Some(DType::Bool)))
    }

    /// The indices of element `flat` (row-major) of a region with these extents.
    fn element_indices(
        &mut self,
        dims: &[tilec_ir::RegionDim],
        extents: &[i64],
        flat: i64,
    ) -> Vec<ExprId> {
        let mut rest = flat;
        let mut offsets = vec![0; extents.len()];
        for (offset, &extent) in offsets.iter_mut().zip(extents).rev() {
            *offset = rest % extent.max(1);
            rest /= extent.max(1);
        }
        dims.iter()
            .zip(offsets)
            .map(|(dim, offset)| {
                let offset = self.world.exprs.int(offset);
                self.world.exprs.add(dim.start, offset)
            })
            .collect()
    }
}
