//! A readable text form of a world, for `tilec ir` and for snapshot tests.

use std::fmt::{self, Write as _};

use crate::data::{BinaryOp, DataExpr, DataId};
use crate::value::write_python_float;
use crate::world::{
    AtomicSource, ControlOp, EntityId, EntityKind, LoopKind, Region, TileOp, World,
};

impl World {
    /// The whole world as indented text: one line per entity, children indented under parents.
    pub fn pretty(&self) -> String {
        let mut out = String::new();
        let args: Vec<String> = self
            .args
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        let _ = writeln!(out, "kernel {}({})", self.kernel_name, args.join(", "));
        if !self.pass_configs.is_empty() {
            let configs: Vec<String> = self
                .pass_configs
                .iter()
                .map(|(k, v)| format!("{k:?}: {v}"))
                .collect();
            let _ = writeln!(out, "  pass_configs {{{}}}", configs.join(", "));
        }
        if self.incomplete {
            let _ = writeln!(out, "  (incomplete: the front end reported an error)");
        }
        for &root in &self.roots {
            self.pretty_entity(&mut out, root, 1);
        }
        out
    }

    fn pretty_entity(&self, out: &mut String, entity: EntityId, depth: usize) {
        let indent = "  ".repeat(depth);
        let _ = writeln!(
            out,
            "{indent}#{} {}",
            entity.index(),
            self.describe_entity(entity)
        );
        for &child in self.body(entity) {
            self.pretty_entity(out, child, depth + 1);
        }
        if let Some(else_body) = self.else_bodies.get(entity) {
            let _ = writeln!(out, "{indent}else:");
            for &child in else_body {
                self.pretty_entity(out, child, depth + 1);
            }
        }
    }

    /// One line describing an entity: `buffer A_shared: float16[128, 32] shared`.
    pub fn describe_entity(&self, entity: EntityId) -> String {
        let name = self.name(entity);
        match self.kind(entity) {
            Some(EntityKind::Param) => {
                let output = if self.outputs.contains(&entity) {
                    " (output)"
                } else {
                    ""
                };
                format!("param {name}: {}{output}", self.buffer_type(entity))
            }
            Some(EntityKind::Buffer) | Some(EntityKind::Var) => {
                format!("buffer {name}: {}", self.buffer_type(entity))
            }
            Some(EntityKind::Kernel) => match self.launches.get(entity) {
                Some(launch) => {
                    let grid: Vec<String> = launch
                        .grid
                        .iter()
                        .map(|&e| self.exprs.display(e).to_string())
                        .collect();
                    let vars: Vec<&str> = launch
                        .block_vars
                        .iter()
                        .map(|&v| self.exprs.var_info(v).name.as_str())
                        .collect();
                    let threads: Vec<String> = launch.threads.iter().map(i64::to_string).collect();
                    format!(
                        "launch grid ({}) threads ({}) as ({})",
                        grid.join(", "),
                        threads.join(", "),
                        vars.join(", ")
                    )
                }
                None => "launch".to_owned(),
            },
            Some(EntityKind::Loop) => match self.loops.get(entity) {
                Some(info) => {
                    let extents: Vec<String> = info
                        .extents
                        .iter()
                        .map(|&e| self.exprs.display(e).to_string())
                        .collect();
                    let kind = match info.kind {
                        LoopKind::Parallel => "Parallel".to_owned(),
                        LoopKind::Pipelined { num_stages } => {
                            format!("Pipelined[num_stages={num_stages}]")
                        }
                        LoopKind::Serial => "serial".to_owned(),
                        LoopKind::Unroll => "unroll".to_owned(),
                        LoopKind::While => {
                            return match self.conditions.get(entity) {
                                Some(&cond) => format!("while {}", self.display_data(cond)),
                                None => "while".to_owned(),
                            };
                        }
                    };
                    format!("for {name} in {kind}({})", extents.join(", "))
                }
                None => "loop".to_owned(),
            },
            Some(EntityKind::TileOp) => match self.ops.get(entity) {
                Some(op) => self.describe_op(op),
                None => "op".to_owned(),
            },
            Some(EntityKind::Store) => match self.stores.get(entity) {
                Some(store) => {
                    let indices: Vec<String> = store
                        .indices
                        .iter()
                        .map(|&e| self.exprs.display(e).to_string())
                        .collect();
                    format!(
                        "{}[{}] = {}",
                        self.name(store.buffer),
                        indices.join(", "),
                        self.display_data(store.value)
                    )
                }
                None => "store".to_owned(),
            },
            Some(EntityKind::If) => match self.conditions.get(entity) {
                Some(&cond) => format!("if {}", self.display_data(cond)),
                None => "if".to_owned(),
            },
            Some(EntityKind::Bind) => match self.bindings.get(entity) {
                Some(binding) => format!(
                    "let {} = {}",
                    self.exprs.var_info(binding.var).name,
                    self.display_data(binding.value)
                ),
                None => "let".to_owned(),
            },
            None => "?".to_owned(),
        }
    }

    fn buffer_type(&self, buffer: EntityId) -> String {
        let dtype = self.dtypes.get(buffer).map_or("?", |dtype| dtype.name());
        let shape: Vec<String> = self.shapes.get(buffer).map_or_else(Vec::new, |shape| {
            shape
                .iter()
                .map(|&e| self.exprs.display(e).to_string())
                .collect()
        });
        let scope = self.scopes.get(buffer).map_or("?", |scope| scope.name());
        format!("{dtype}[{}] {scope}", shape.join(", "))
    }

    fn describe_op(&self, op: &TileOp) -> String {
        let r = |region: &Region| self.display_region(region);
        match op {
            TileOp::Copy { src, dst } => format!("copy {} -> {}", r(src), r(dst)),
            TileOp::Fill {
                dst, clear: true, ..
            } => format!("clear {}", r(dst)),
            TileOp::Fill { dst, value, .. } => {
                format!("fill {} with {}", r(dst), self.display_data(*value))
            }
            TileOp::Gemm {
                a,
                b,
                c,
                transpose_a,
                transpose_b,
                policy,
                clear_accum,
                k_pack,
            } => format!(
                "gemm {} x {} -> {} (transpose_A={transpose_a}, transpose_B={transpose_b}, policy={policy:?}, clear_accum={clear_accum}, k_pack={k_pack})",
                r(a),
                r(b),
                r(c)
            ),
            TileOp::Reduce {
                kind,
                src,
                dst,
                dim,
                clear,
            } => format!(
                "{} {} -> {} (dim={dim}, clear={clear})",
                kind.name(),
                r(src),
                r(dst)
            ),
            TileOp::Scan {
                op: scan,
                src,
                dst,
                dim,
                reverse,
            } => format!(
                "{} {} -> {} (dim={dim}, reverse={reverse})",
                scan.name(),
                r(src),
                r(dst)
            ),
            TileOp::Atomic {
                op: atomic,
                dst,
                src: AtomicSource::Region(src),
                ..
            } => format!(
                "{} {} {} {}",
                op.name(),
                r(dst),
                atomic_symbol(*atomic),
                r(src)
            ),
            TileOp::Atomic {
                op: atomic,
                dst,
                src: AtomicSource::Value(value),
                prev,
            } => {
                let returns = match prev {
                    Some(prev) => format!(" (old value to {})", self.name(*prev)),
                    None => String::new(),
                };
                format!(
                    "{} {} {} {}{returns}",
                    op.name(),
                    r(dst),
                    atomic_symbol(*atomic),
                    self.display_data(*value)
                )
            }
            TileOp::UseSwizzle {
                panel_size,
                column_major,
                enable,
            } => format!(
                "use_swizzle(panel_size={panel_size}, column_major={column_major}, enable={enable})"
            ),
            TileOp::AnnotateLayout { buffer, layout } => {
                let vars: Vec<&str> = layout
                    .vars
                    .iter()
                    .map(|&v| self.exprs.var_info(v).name.as_str())
                    .collect();
                let outputs: Vec<String> = layout
                    .outputs
                    .iter()
                    .map(|&e| self.exprs.display(e).to_string())
                    .collect();
                format!(
                    "annotate_layout {} = {:?}(({}) -> ({}))",
                    self.name(*buffer),
                    layout.kind,
                    vars.join(", "),
                    outputs.join(", ")
                )
            }
            TileOp::Control(ControlOp::DeviceAssert { cond, message }) => {
                format!("device_assert {} {message:?}", self.display_data(*cond))
            }
            TileOp::Control(ControlOp::RngInit {
                seed,
                subsequence,
                offset,
            }) => format!(
                "rng_init({}, {}, {})",
                self.display_data(*seed),
                self.display_data(*subsequence),
                self.display_data(*offset)
            ),
            TileOp::Control(control) => control.name().to_owned(),
            TileOp::ThreadAllReduce {
                combiner,
                source,
                result,
                dims,
            } => format!(
                "thread_allreduce {} = fold {} of {} over thread dims {dims:?}",
                r(result),
                combiner.symbol(),
                self.display_data(*source)
            ),
            TileOp::ExternCall(call) => {
                let args: Vec<String> = call
                    .args
                    .iter()
                    .map(|arg| match arg {
                        crate::world::ExternArg::Pointer { element, .. } => {
                            format!("&{}", r(element))
                        }
                        crate::world::ExternArg::Value(value) => self.display_data(*value),
                    })
                    .collect();
                let name = call.name.as_deref().unwrap_or("<unknown>");
                format!("call_extern {name}({})", args.join(", "))
            }
            TileOp::FinalizeReducer {
                buffer,
                combiner,
                init,
            } => {
                let init = init.map_or(String::new(), |init| {
                    format!(", starting at {}", self.display_data(init))
                });
                format!(
                    "finalize_reducer {} ({}{init})",
                    self.name(*buffer),
                    combiner.symbol()
                )
            }
            TileOp::ImportSource { source } => match source {
                Some(text) => format!("import_source ({} bytes)", text.len()),
                None => "import_source (unknown text)".to_owned(),
            },
        }
    }

    /// `A[by * 128, 0:32]`: points print as their index, slices as `start:stop`, whole dims as `:`.
    pub fn display_region(&self, region: &Region) -> String {
        let shape = self.shapes.get(region.buffer);
        let dims: Vec<String> = region
            .dims
            .iter()
            .enumerate()
            .map(|(axis, dim)| match dim.extent {
                None => self.exprs.display(dim.start).to_string(),
                Some(extent) => {
                    let whole = self.exprs.as_int(dim.start) == Some(0)
                        && shape.and_then(|s| s.get(axis)) == Some(&extent);
                    if whole {
                        ":".to_owned()
                    } else {
                        match (self.exprs.as_int(dim.start), self.exprs.as_int(extent)) {
                            (Some(start), Some(extent)) => format!("{start}:{}", start + extent),
                            _ => {
                                let start = self.exprs.display(dim.start);
                                format!("{start}:{start} + {}", self.exprs.display(extent))
                            }
                        }
                    }
                }
            })
            .collect();
        format!("{}[{}]", self.name(region.buffer), dims.join(", "))
    }

    /// A data expression as Python-like text.
    pub fn display_data(&self, id: DataId) -> String {
        let mut out = String::new();
        let _ = self.write_data(&mut out, id, false);
        out
    }

    fn write_data(&self, out: &mut String, id: DataId, nested: bool) -> fmt::Result {
        match self.data.get(id) {
            DataExpr::Float { bits, dtype } => {
                let mut text = String::new();
                write_python_float(&mut text, f64::from_bits(*bits))?;
                match dtype {
                    Some(dtype) => write!(out, "T.{dtype}({text})"),
                    None => out.write_str(&text),
                }
            }
            DataExpr::Int {
                value,
                dtype: Some(dtype),
            } => write!(out, "T.{dtype}({value})"),
            DataExpr::Int { value, dtype: None } => write!(out, "{value}"),
            DataExpr::Index(e) => write!(out, "{}", self.exprs.display(*e)),
            DataExpr::Load { buffer, indices } => {
                let indices: Vec<String> = indices
                    .iter()
                    .map(|&e| self.exprs.display(e).to_string())
                    .collect();
                write!(out, "{}[{}]", self.name(*buffer), indices.join(", "))
            }
            DataExpr::ReadVar(var) => out.write_str(self.name(*var)),
            DataExpr::Neg(inner) => {
                out.write_str("-")?;
                self.write_data(out, *inner, true)
            }
            DataExpr::Not(inner) => {
                out.write_str("not ")?;
                self.write_data(out, *inner, true)
            }
            DataExpr::Binary {
                op: op @ (BinaryOp::Max | BinaryOp::Min),
                lhs,
                rhs,
            } => {
                write!(out, "T.{}(", op.symbol())?;
                self.write_data(out, *lhs, false)?;
                out.write_str(", ")?;
                self.write_data(out, *rhs, false)?;
                out.write_str(")")
            }
            DataExpr::Binary { op, lhs, rhs } => {
                self.write_infix(out, op.symbol(), *lhs, *rhs, nested)
            }
            DataExpr::Compare { op, lhs, rhs } => {
                self.write_infix(out, op.symbol(), *lhs, *rhs, nested)
            }
            DataExpr::Call { intrinsic, args } => {
                write!(out, "T.{}(", intrinsic.name())?;
                for (index, arg) in args.iter().enumerate() {
                    if index > 0 {
                        out.write_str(", ")?;
                    }
                    self.write_data(out, *arg, false)?;
                }
                out.write_str(")")
            }
            DataExpr::Cast { dtype, value } => {
                write!(out, "T.Cast({dtype}, ")?;
                self.write_data(out, *value, false)?;
                out.write_str(")")
            }
            DataExpr::Reinterpret { dtype, value, .. } => {
                out.write_str("T.reinterpret(")?;
                self.write_data(out, *value, false)?;
                write!(out, ", {dtype})")
            }
            DataExpr::Shuffle {
                kind,
                value,
                lane,
                width,
                mask,
            } => {
                write!(out, "T.{}(", kind.name())?;
                for (index, operand) in [value, lane, width, mask].into_iter().enumerate() {
                    if index > 0 {
                        out.write_str(", ")?;
                    }
                    self.write_data(out, *operand, false)?;
                }
                out.write_str(")")
            }
            DataExpr::WarpReduce { op, value } => {
                write!(out, "T.warp_reduce_{}(", warp_reduce_name(*op))?;
                self.write_data(out, *value, false)?;
                out.write_str(")")
            }
            DataExpr::Random(kind) => out.write_str(kind.name()),
            DataExpr::Select {
                cond,
                then,
                otherwise,
            } => {
                out.write_str("T.if_then_else(")?;
                self.write_data(out, *cond, false)?;
                out.write_str(", ")?;
                self.write_data(out, *then, false)?;
                out.write_str(", ")?;
                self.write_data(out, *otherwise, false)?;
                out.write_str(")")
            }
        }
    }

    fn write_infix(
        &self,
        out: &mut String,
        symbol: &str,
        lhs: DataId,
        rhs: DataId,
        nested: bool,
    ) -> fmt::Result {
        if nested {
            out.write_str("(")?;
        }
        self.write_data(out, lhs, true)?;
        write!(out, " {symbol} ")?;
        self.write_data(out, rhs, true)?;
        if nested {
            out.write_str(")")?;
        }
        Ok(())
    }
}

/// The suffix of the `T.warp_reduce_*` that combines with `op`.
fn warp_reduce_name(op: BinaryOp) -> &'static str {
    match op {
        BinaryOp::Max => "max",
        BinaryOp::Min => "min",
        BinaryOp::BitAnd => "bitand",
        BinaryOp::BitOr => "bitor",
        _ => "sum",
    }
}

/// The update an atomic tile operation makes, as the dump prints it (`+=`, `max=`, `min=`).
fn atomic_symbol(op: crate::thread::AtomicOp) -> &'static str {
    match op {
        crate::thread::AtomicOp::Add => "+=",
        crate::thread::AtomicOp::Max => "max=",
        crate::thread::AtomicOp::Min => "min=",
    }
}
