//! `T.atomic_addx2(dst, src)` and `T.atomic_addx4(dst, src)`: the 2 or 4 consecutive elements
//! that start at `dst` (along its last dimension) each gain the matching element from `src`.
//!
//! TileLang prints them as one vector atomic (`atomicAdd` on a `float2`/`float4`), which is
//! atomic per element, not for the vector as a whole. So they mean exactly what the same number of
//! element atomics mean, and tilec reads them as that: one `T.atomic_add` per element, whose
//! lowering, emulation and CUDA exist already. The vector instruction is faster; tilec's code
//! issues the element atomics one after the other.

use tilec_ir::{AtomicSource, Code, EntityKind, ExprId, Region, TileOp};

use crate::builder::{Builder, Eval};
use crate::eval::Args;
use crate::value::Value;

impl Builder<'_> {
    pub(super) fn vector_atomic_add<'a>(
        &mut self,
        name: &str,
        lanes: i64,
        args: Args<'a>,
    ) -> Eval<Value<'a>> {
        if matches!(args.keyword("return_prev"), Some(Value::Bool(true))) {
            return Err(self.error(
                Code::NotAnalysed,
                args.span,
                format!("`T.{name}(..., return_prev=True)` is not supported by tilec yet"),
            ));
        }
        let dst = self.vector_start(&args, 0, "dst", (name, lanes))?;
        let src = match self.required(&args, 1, "value")? {
            Value::Region(_) | Value::Buffer(_) => {
                Some(self.vector_start(&args, 1, "value", (name, lanes))?)
            }
            _ => None,
        };
        for lane in 0..lanes {
            let target = self.shifted(&dst, lane);
            let value = match &src {
                Some(region) => Value::Region(self.shifted(region, lane)),
                None => self.required(&args, 1, "value")?,
            };
            let (value, _) = self.data_expr(&value, args.span_of(1, "value"))?;
            let op = TileOp::Atomic {
                op: tilec_ir::thread::AtomicOp::Add,
                dst: target,
                src: AtomicSource::Value(value),
                prev: None,
            };
            self.add_tile_op(op, &format!("`T.{name}`"), args.span)?;
        }
        Ok(Value::None)
    }

    /// The vector argument `index` of `T.{name}` as the element it starts at: `dst[i, j]` as
    /// written, or a region or buffer of `lanes` elements along its last dimension (`dst[i, 0:4]`),
    /// which TileLang takes too.
    fn vector_start(
        &mut self,
        args: &Args<'_>,
        index: usize,
        param: &str,
        (name, lanes): (&str, i64),
    ) -> Eval<Region> {
        let region = match args.get(index, param) {
            Some(Value::Buffer(buffer)) if self.world.kind(*buffer) != Some(EntityKind::Var) => {
                Some(self.world.full_region(*buffer))
            }
            Some(Value::Region(region)) => Some(region.clone()),
            _ => None,
        };
        let Some(mut region) = region else {
            return self.element_arg(args, index, param, name);
        };
        let extent_is = |world: &tilec_ir::World, extent: Option<ExprId>, n: i64| {
            extent.is_none_or(|e| world.exprs.as_int(e) == Some(n))
        };
        let spans_the_vector = region.dims.split_last().is_some_and(|(last, rest)| {
            last.extent
                .is_some_and(|e| self.world.exprs.as_int(e) == Some(lanes))
                && rest.iter().all(|dim| extent_is(&self.world, dim.extent, 1))
        });
        if !spans_the_vector {
            return self.element_arg(args, index, param, name);
        }
        for dim in &mut region.dims {
            dim.extent = None;
        }
        Ok(region)
    }

    /// The element argument `index` (`dst[i, j]`), where the vector starts.
    pub(super) fn element_arg(
        &mut self,
        args: &Args<'_>,
        index: usize,
        param: &str,
        name: &str,
    ) -> Eval<Region> {
        match args.get(index, param) {
            Some(Value::Region(region)) if region.dims.iter().all(|dim| dim.extent.is_none()) => {
                Ok(region.clone())
            }
            other => {
                let found = other.map_or("nothing".to_owned(), |value| value.describe().to_owned());
                Err(self.error(
                    Code::InvalidCall,
                    args.span_of(index, param),
                    format!("`T.{name}` takes the first element of a vector (`buf[i, j]`), found {found}"),
                ))
            }
        }
    }

    /// `region` moved `lane` elements further along its last dimension.
    pub(super) fn shifted(&mut self, region: &Region, lane: i64) -> Region {
        let mut moved = region.clone();
        if let Some(last) = moved.dims.last_mut() {
            let offset = self.world.exprs.int(lane);
            last.start = self.world.exprs.add(last.start, offset);
        }
        moved
    }
}
