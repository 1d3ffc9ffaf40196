//! `T.im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad)` (also `T.c2d_im2col`):
//! one tile of the implicit-gemm matrix of a 2-D convolution.
//!
//! `img` is an NHWC image `(N, H, W, C)` in global memory; `col` a `(block_M, block_K)` tile. Row
//! `m` of the tile is output pixel `p = nhw_step * block_M + m`, that is `(n, oh, ow)` with `ow`
//! fastest over the `(N, OH, OW)` output; column `k` is `q = c_step * block_K + k`, that is
//! `(kh, kw, c)` with `c` fastest, the order of a `(KH, KW, C, F)` filter read as a
//! `(KH * KW * C, F)` matrix. The element is `img[n, oh * stride + kh * dilation - pad,
//! ow * stride + kw * dilation - pad, c]`, or zero where that lies in the padding or past the
//! image, as TileLang's TMA im2col load fills it. tilec builds exactly that as a `T.Parallel`
//! store over the tile, so layout, lowering and the emulator treat it as any other loop; the TMA
//! instruction itself is not used.

use tilec_ir::data::{BinaryOp, CompareOp};
use tilec_ir::{
    Code, DataExpr, DataId, EntityId, EntityKind, ExprId, LoopInfo, LoopKind, Region, RegionDim,
};

use crate::builder::{Block, Builder, Eval};
use crate::eval::Args;
use crate::value::Value;

/// The convolution's constant parameters: kernel size (square), stride, dilation and padding.
#[derive(Clone, Copy)]
struct Conv {
    kernel: i64,
    stride: i64,
    dilation: i64,
    pad: i64,
}

impl Builder<'_> {
    pub(super) fn im2col<'a>(&mut self, args: Args<'a>) -> Eval<Value<'a>> {
        let img = self.im2col_buffer(&args, 0, "img", 4)?;
        let col = self.im2col_buffer(&args, 1, "col", 2)?;
        let nhw_step = self.im2col_index(&args, 2, "nhw_step")?;
        let c_step = self.im2col_index(&args, 3, "c_step")?;
        let conv = Conv {
            kernel: self.int_arg(&args, 4, "kernel", 1)?,
            stride: self.int_arg(&args, 5, "stride", 1)?,
            dilation: self.int_arg(&args, 6, "dilation", 1)?,
            pad: self.int_arg(&args, 7, "pad", 0)?,
        };
        if conv.kernel < 1 || conv.stride < 1 || conv.dilation < 1 || conv.pad < 0 {
            return Err(self.error(
                Code::InvalidCall,
                args.span,
                "`T.im2col` needs a kernel, stride and dilation of at least 1 and a padding of at least 0",
            ));
        }
        let tile = self.world.shapes.get(col).cloned().unwrap_or_default();
        let entity = self.add_kernel_entity(EntityKind::Loop, "`T.im2col`", args.span)?;
        let m = self
            .world
            .exprs
            .var("im2col_m", self.world.exprs.as_int(tile[0]));
        let k = self
            .world
            .exprs
            .var("im2col_k", self.world.exprs.as_int(tile[1]));
        self.world
            .names
            .set(entity, "im2col_m, im2col_k".to_owned());
        self.world.loops.set(
            entity,
            LoopInfo {
                kind: LoopKind::Parallel,
                vars: vec![m, k],
                extents: tile.clone(),
            },
        );
        let span = args.span;
        self.in_block(Block::Body(entity), |builder| {
            let m = builder.world.exprs.var_expr(m);
            let k = builder.world.exprs.var_expr(k);
            let pixel = builder.world.exprs.mul(nhw_step, tile[0]);
            let pixel = builder.world.exprs.add(pixel, m);
            let column = builder.world.exprs.mul(c_step, tile[1]);
            let column = builder.world.exprs.add(column, k);
            let value = builder.im2col_element(img, pixel, column, conv, span)?;
            let target = Region {
                buffer: col,
                dims: vec![
                    RegionDim {
                        start: m,
                        extent: None,
                    },
                    RegionDim {
                        start: k,
                        extent: None,
                    },
                ],
            };
            builder.store(target, value, span)
        })?;
        Ok(Value::None)
    }

    /// `img`'s element for output pixel `pixel` and filter position `column`, zero outside it.
    fn im2col_element<'a>(
        &mut self,
        img: EntityId,
        pixel: ExprId,
        column: ExprId,
        conv: Conv,
        span: tilec_ir::Span,
    ) -> Eval<Value<'a>> {
        let shape = self.world.shapes.get(img).cloned().unwrap_or_default();
        let [batch, height, width, channels] = [shape[0], shape[1], shape[2], shape[3]];
        let e = &mut self.world.exprs;
        let reach = e.int(conv.dilation * (conv.kernel - 1) + 1 - 2 * conv.pad);
        let stride = e.int(conv.stride);
        let one = e.int(1);
        // OH = (H + 2 pad - dilation (kernel - 1) - 1) // stride + 1, and OW alike.
        let out_h = e.sub(height, reach);
        let out_h = e.floordiv(out_h, stride);
        let out_h = e.add(out_h, one);
        let out_w = e.sub(width, reach);
        let out_w = e.floordiv(out_w, stride);
        let out_w = e.add(out_w, one);
        let plane = e.mul(out_h, out_w);
        let n = e.floordiv(pixel, plane);
        let oh = e.floordiv(pixel, out_w);
        let oh = e.floormod(oh, out_h);
        let ow = e.floormod(pixel, out_w);
        let kernel = e.int(conv.kernel);
        let c = e.floormod(column, channels);
        let kw = e.floordiv(column, channels);
        let kw = e.floormod(kw, kernel);
        let kh_stride = e.mul(channels, kernel);
        let kh = e.floordiv(column, kh_stride);
        let dilation = e.int(conv.dilation);
        let pad = e.int(conv.pad);
        let h = {
            let base = e.mul(oh, stride);
            let offset = e.mul(kh, dilation);
            let sum = e.add(base, offset);
            e.sub(sum, pad)
        };
        let w = {
            let base = e.mul(ow, stride);
            let offset = e.mul(kw, dilation);
            let sum = e.add(base, offset);
            e.sub(sum, pad)
        };
        let zero = e.int(0);
        let inside = [(n, batch), (kh, kernel), (h, height), (w, width)];
        let mut cond: Option<DataId> = None;
        for (index, extent) in inside {
            for (op, bound) in [(CompareOp::Ge, zero), (CompareOp::Lt, extent)] {
                let lhs = self.world.data.push(DataExpr::Index(index));
                let rhs = self.world.data.push(DataExpr::Index(bound));
                let test = self.world.data.push(DataExpr::Compare { op, lhs, rhs });
                cond = Some(match cond {
                    None => test,
                    Some(previous) => self.world.data.push(DataExpr::Binary {
                        op: BinaryOp::And,
                        lhs: previous,
                        rhs: test,
                    }),
                });
            }
        }
        let element = Region {
            buffer: img,
            dims: [n, h, w, c]
                .into_iter()
                .map(|start| RegionDim {
                    start,
                    extent: None,
                })
                .collect(),
        };
        let (load, dtype) = self.data_expr(&Value::Region(element), span)?;
        let cond = cond.map_or(Value::Bool(true), |id| Value::Data {
            id,
            dtype: Some(tilec_ir::DType::Bool),
        });
        self.select(cond, Value::Data { id: load, dtype }, Value::Int(0), span)
    }

    /// Argument `index`, a buffer of `rank` dimensions.
    fn im2col_buffer(
        &mut self,
        args: &Args<'_>,
        index: usize,
        name: &str,
        rank: usize,
    ) -> Eval<EntityId> {
        let buffer = match args.get(index, name) {
            Some(Value::Buffer(buffer)) => Some(*buffer),
            _ => None,
        };
        match buffer {
            Some(buffer) if self.world.shapes.get(buffer).map(Vec::len) == Some(rank) => Ok(buffer),
            _ => Err(self.error(
                Code::InvalidCall,
                args.span_of(index, name),
                format!("`T.im2col` takes `{name}` as a whole buffer of {rank} dimensions"),
            )),
        }
    }

    /// Argument `index`, an integer (index) expression.
    fn im2col_index(&mut self, args: &Args<'_>, index: usize, name: &str) -> Eval<ExprId> {
        let value = self.required(args, index, name)?;
        self.index_expr(&value).ok_or_else(|| {
            self.error(
                Code::InvalidCall,
                args.span_of(index, name),
                format!("`T.im2col` takes `{name}` as an integer"),
            )
        })
    }
}
