//! Warp-level operations and per-thread random numbers: the shuffles (`T.shfl_sync`,
//! `T.shfl_xor`, `T.shfl_down`, `T.shfl_up` and TVM's `T.tvm_warp_shuffle*`), the warp reductions
//! (`T.warp_reduce_sum`, `_max`, `_min`, `_bitand`, `_bitor`), and curand's Philox generator
//! (`T.rng_init`, `T.rng_rand`, `T.rng_rand_float`).
//!
//! A shuffle reads a value another lane computed, so it is a data expression of its own rather
//! than arithmetic: lowering keeps it as one node, which the emulator evaluates for all lanes of a
//! warp at once. TileLang's wrappers take `(value, lane, width=32, mask=0xffffffff)`; TVM's take
//! `(mask, value, lane, width, warp_size)`, and CUDA ignores `warp_size` (always 32).

use tilec_ir::data::{BinaryOp, RandomKind, ShuffleKind};
use tilec_ir::{Code, ControlOp, DType, DataExpr, DataId, TileOp};

use crate::builder::{Builder, Eval, Stop};
use crate::eval::Args;
use crate::value::Value;

/// The full-warp lane mask TileLang passes by default.
const FULL_MASK: i64 = 0xffff_ffff;

impl Builder<'_> {
    /// `T.shfl_*` and `T.tvm_warp_shuffle*`: the value of another lane of the warp.
    pub(super) fn shuffle<'a>(&mut self, name: &str, args: Args<'a>) -> Eval<Value<'a>> {
        let (kind, tvm) = match name {
            "shfl_sync" => (ShuffleKind::Index, false),
            "shfl_xor" => (ShuffleKind::Xor, false),
            "shfl_down" => (ShuffleKind::Down, false),
            "shfl_up" => (ShuffleKind::Up, false),
            "tvm_warp_shuffle" => (ShuffleKind::Index, true),
            "tvm_warp_shuffle_down" => (ShuffleKind::Down, true),
            _ => (ShuffleKind::Up, true),
        };
        let lane_name = match (kind, tvm) {
            (ShuffleKind::Index, false) => "srcLane",
            (_, false) => "delta",
            (ShuffleKind::Index, true) => "warp_id",
            (_, true) => "offset",
        };
        // Positions of (value, lane, width, mask) among the arguments.
        let [value_at, lane_at, width_at, mask_at] = if tvm { [1, 2, 3, 0] } else { [0, 1, 2, 3] };
        let value = self.required(&args, value_at, "value")?;
        let (value, dtype) = self.data_expr(&value, args.span_of(value_at, "value"))?;
        let lane = self.required(&args, lane_at, lane_name)?;
        let (lane, _) = self.data_expr(&lane, args.span_of(lane_at, lane_name))?;
        let width = self.optional_data(&args, (width_at, "width"), 32, DType::Int32)?;
        let mask = self.optional_data(&args, (mask_at, "mask"), FULL_MASK, DType::UInt32)?;
        if tvm && args.get(4, "warp_size").is_none() {
            return Err(self.error(
                Code::InvalidCall,
                args.span,
                format!("missing argument `warp_size` of `T.{name}`"),
            ));
        }
        let node = DataExpr::Shuffle {
            kind,
            value,
            lane,
            width,
            mask,
        };
        Ok(self.data(node, dtype))
    }

    /// An optional data argument with a typed default.
    fn optional_data(
        &mut self,
        args: &Args<'_>,
        (index, name): (usize, &str),
        default: i64,
        dtype: DType,
    ) -> Eval<DataId> {
        match args.get(index, name) {
            None | Some(Value::None) => Ok(self.world.data.push(DataExpr::Int {
                value: default,
                dtype: Some(dtype),
            })),
            Some(Value::Poison) => Err(Stop),
            Some(value) => {
                let value = value.clone();
                Ok(self.data_expr(&value, args.span_of(index, name))?.0)
            }
        }
    }

    /// `T.warp_reduce_{sum,max,min,bitand,bitor}(value)`: the reduction over the warp's 32 lanes.
    pub(super) fn warp_reduce<'a>(&mut self, name: &str, args: Args<'a>) -> Eval<Value<'a>> {
        let op = match name.trim_start_matches("warp_reduce_") {
            "sum" => BinaryOp::Add,
            "max" => BinaryOp::Max,
            "min" => BinaryOp::Min,
            "bitand" => BinaryOp::BitAnd,
            _ => BinaryOp::BitOr,
        };
        let value = self.required(&args, 0, "value")?;
        let (value, dtype) = self.data_expr(&value, args.span_of(0, "value"))?;
        if matches!(op, BinaryOp::BitAnd | BinaryOp::BitOr) && dtype.is_some_and(|d| d.is_float()) {
            let dtype = dtype.map_or_else(String::new, |d| d.to_string());
            return Err(self.error(
                Code::DtypeMismatch,
                args.span_of(0, "value"),
                format!("`T.{name}` combines bits and needs an integer value, found {dtype}"),
            ));
        }
        Ok(self.data(DataExpr::WarpReduce { op, value }, dtype))
    }

    /// `T.rng_init(seed, seq=None, off=0, generator=...)`: starts the thread's Philox generator.
    /// Without `seq`, each thread takes its own subsequence `tx + bx * blockDim.x`, as TileLang
    /// does.
    pub(super) fn rng_init<'a>(&mut self, args: Args<'a>) -> Eval<Value<'a>> {
        self.rng_generator(&args)?;
        let seed = self.required(&args, 0, "seed")?;
        let (seed, _) = self.data_expr(&seed, args.span_of(0, "seed"))?;
        let subsequence = match args.get(1, "seq") {
            None | Some(Value::None) => self.default_subsequence(&args)?,
            Some(Value::Poison) => return Err(Stop),
            Some(value) => {
                let value = value.clone();
                self.data_expr(&value, args.span_of(1, "seq"))?.0
            }
        };
        let offset = self.optional_data(&args, (2, "off"), 0, DType::Int64)?;
        let op = ControlOp::RngInit {
            seed,
            subsequence,
            offset,
        };
        self.add_tile_op(TileOp::Control(op), "`T.rng_init`", args.span)?;
        Ok(Value::None)
    }

    /// Refuses the generators other than Philox4x32-10, which is the only one tilec reproduces.
    fn rng_generator(&mut self, args: &Args<'_>) -> Eval<()> {
        match args.get(3, "generator") {
            None | Some(Value::None) => Ok(()),
            Some(Value::Str(name)) if name.as_ref() == "curandStatePhilox4_32_10_t" => Ok(()),
            Some(Value::Str(name))
                if matches!(
                    name.as_ref(),
                    "curandStateMRG32k3a_t" | "curandStateXORWOW_t"
                ) =>
            {
                let name = name.to_string();
                Err(self.error(
                    Code::NotAnalysed,
                    args.span_of(3, "generator"),
                    format!(
                        "the random generator `{name}` is not supported by tilec yet: only \
                         `curandStatePhilox4_32_10_t` (the default) is"
                    ),
                ))
            }
            Some(Value::Poison) => Err(Stop),
            Some(other) => {
                let what = other.describe();
                Err(self.error(
                    Code::InvalidCall,
                    args.span_of(3, "generator"),
                    format!(
                        "`generator` must be one of \"curandStatePhilox4_32_10_t\", \
                         \"curandStateMRG32k3a_t\", \"curandStateXORWOW_t\", found {what}"
                    ),
                ))
            }
        }
    }

    /// `threadIdx.x + blockIdx.x * blockDim.x`, the subsequence TileLang gives each thread.
    fn default_subsequence(&mut self, args: &Args<'_>) -> Eval<DataId> {
        let (flat, threads) = self.flat_thread_index(args.span, "rng_init")?;
        let tx = self.thread_dimension(flat, &threads, 0);
        let bx = self.block_dimension(0, args.span, "rng_init")?;
        let extent = self.world.exprs.int(threads.first().copied().unwrap_or(1));
        let scaled = self.world.exprs.mul(bx, extent);
        let index = self.world.exprs.add(tx, scaled);
        Ok(self.world.data.push(DataExpr::Index(index)))
    }

    /// `T.rng_rand()` and `T.rng_rand_float(bit=32, dist="uniform")`: the next random number.
    pub(super) fn rng_draw<'a>(&mut self, name: &str, args: Args<'a>) -> Eval<Value<'a>> {
        let kind = if name == "rng_rand" {
            RandomKind::Bits
        } else {
            let bits = self.int_arg(&args, 0, "bit", 32)?;
            let dist = match args.get(1, "dist") {
                None | Some(Value::None) => "uniform".to_owned(),
                Some(Value::Str(dist)) => dist.to_string(),
                Some(Value::Poison) => return Err(Stop),
                Some(other) => {
                    let what = other.describe();
                    return Err(self.error(
                        Code::InvalidCall,
                        args.span_of(1, "dist"),
                        format!("`dist` must be \"uniform\" or \"normal\", found {what}"),
                    ));
                }
            };
            if (bits, dist.as_str()) != (32, "uniform") {
                return Err(self.error(
                    Code::NotAnalysed,
                    args.span,
                    format!(
                        "`T.rng_rand_float(bit={bits}, dist={dist:?})` is not supported by tilec \
                         yet: only 32-bit uniform floats are (curand's normal and 64-bit draws \
                         use approximate math the emulator cannot reproduce bit for bit)"
                    ),
                ));
            }
            RandomKind::Uniform
        };
        Ok(self.data(DataExpr::Random(kind), Some(kind.dtype())))
    }
}
