//! Hopper's warpgroup statements: `wgmma.mma_async` with its fences and groups, and the proxy
//! fence that makes generic shared-memory writes visible to it.
//!
//! Each distinct `wgmma` form (shape, operand type, where A comes from, which operands are
//! transposed) gets one helper function of its own in front of the kernel: the inline PTX names
//! every accumulator register as an operand (`n / 2` of them), so the text depends on the shape.
//! Accumulators are passed by pointer to their first register; after unrolling every index is a
//! constant, so they stay in registers, as with `mma.sync`.
//!
//! The operands' dtypes choose the form: `k16` on fp16 or bf16, `k8` on tf32, `k32` on fp8 into
//! an fp32 accumulator or on 8-bit integers into an int32 one. The transpose immediates exist for
//! 16-bit operands only (the others are read K-major), and the integer form has no scale
//! immediates either.

use std::fmt::Write as _;

use tilec_ir::thread::{BufferId, Major, MatrixDescriptor, Memory, Place, WgmmaA};
use tilec_ir::{DType, ExprId};

use super::Printer;

impl Printer<'_> {
    /// One `wgmma`: the descriptors computed from the operands' shared addresses, then the helper.
    pub(super) fn wgmma(
        &mut self,
        n: u32,
        a: &WgmmaA,
        b: &MatrixDescriptor,
        c: (BufferId, ExprId),
    ) {
        let dtype = |p: &Self, id: BufferId| p.program.buffers.get(id.index()).map(|b| b.dtype);
        let a_buffer = match a {
            WgmmaA::Shared(descriptor) => descriptor.buffer,
            WgmmaA::Registers(registers) => registers.buffer,
        };
        let Some(kind) = WgmmaKind::of(
            dtype(self, a_buffer),
            dtype(self, b.buffer),
            dtype(self, c.0),
        ) else {
            return self.skip(
                "a wgmma whose operands are not fp16, bf16, tf32 or fp8 with an fp32 accumulator \
                 nor 8-bit integers with an int32 one",
            );
        };
        let k_major = |major: Major| major == Major::K;
        let a_k_major = match a {
            WgmmaA::Shared(descriptor) => k_major(descriptor.layout.major),
            // Registers have no major: every form takes A from them.
            WgmmaA::Registers { .. } => true,
        };
        if kind.depth != 16 && !(a_k_major && k_major(b.layout.major)) {
            return self
                .skip("a wgmma on tf32, fp8 or 8-bit integers whose operands are not K-major");
        }
        if !(8..=256).contains(&n) || !n.is_multiple_of(8) {
            return self.skip(&format!("a wgmma with n = {n} (8 to 256 in steps of 8)"));
        }
        if self.memory_of(c.0) != Some(Memory::Local) {
            return self.skip("a wgmma whose accumulator is not a register array");
        }
        let Some(accumulator) = self.pointer(c.0, c.1) else {
            return self.skip("a wgmma on buffers that could not be declared");
        };
        let Some(b_desc) = self.descriptor(b) else {
            return self.skip("a wgmma whose B operand is not in shared memory");
        };
        let (a_text, a_form) = match a {
            WgmmaA::Shared(descriptor) => match self.descriptor(descriptor) {
                Some(text) => (text, AForm::Shared(descriptor.layout.major)),
                None => return self.skip("a wgmma whose A descriptor is not in shared memory"),
            },
            WgmmaA::Registers(Place { buffer, index }) => {
                if self.memory_of(*buffer) != Some(Memory::Local) {
                    return self.skip("a wgmma whose A registers are not a register array");
                }
                match self.pointer(*buffer, *index) {
                    Some(text) => (text, AForm::Registers),
                    None => return self.skip("a wgmma on buffers that could not be declared"),
                }
            }
        };
        let name = self.wgmma_helper(n, &kind, a_form, b.layout.major);
        self.line(&format!("{name}({accumulator}, {a_text}, {b_desc});"));
    }

    /// `wgmma.wait_group`, then a register fence over every wgmma accumulator of the program.
    pub(super) fn wgmma_wait(&mut self, pending: u32) {
        self.line(&format!("tl_wgmma_wait<{pending}>();"));
        let mut accumulators = Vec::new();
        tilec_ir::thread::for_each_stmt(&self.program.body, &mut |stmt| {
            if let tilec_ir::thread::Stmt::Wgmma { c, .. } = stmt {
                accumulators.push(c.buffer);
            }
        });
        accumulators.sort_unstable();
        accumulators.dedup();
        for buffer in accumulators {
            let count = self
                .program
                .buffers
                .get(buffer.index())
                .and_then(|b| self.program.exprs.as_int(b.elements));
            if let (Some(name), Some(count)) = (self.buffer_name(buffer), count) {
                self.line(&format!("tl_fence_registers<{count}>({name});"));
            }
        }
    }

    /// The C expression of a descriptor: `tl_wgmma_descriptor(address, lbo, sbo, layout type)`.
    ///
    /// A constant part of the start that is a multiple of 16 bytes is added to the descriptor
    /// instead of the address (`+ bytes / 16`), so that the wgmmas of one gemm, which differ only by
    /// such constants, share one computed descriptor. That is exact: the address field holds
    /// `address / 16` in 14 bits and a shared address is below 2^18, so the sum never carries out
    /// of the field.
    fn descriptor(&mut self, descriptor: &MatrixDescriptor) -> Option<String> {
        if !matches!(
            self.memory_of(descriptor.buffer),
            Some(Memory::Shared { .. })
        ) {
            return None;
        }
        let name = self.buffer_name(descriptor.buffer)?;
        let (rest, constant) = self.program.exprs.split_constant(descriptor.start);
        let (start, offset) = match rest {
            Some(rest) if constant % 16 == 0 => (self.index(rest).text, constant / 16),
            None if constant % 16 == 0 => ("0".to_owned(), constant / 16),
            _ => (self.index(descriptor.start).text, 0),
        };
        let base = format!(
            "tl_wgmma_descriptor((const unsigned char*){name} + ({start}), {}, {}, {})",
            descriptor.layout.leading_bytes,
            descriptor.layout.stride_bytes,
            descriptor.layout.swizzle.layout_type()
        );
        Some(match offset {
            0 => base,
            offset if offset > 0 => format!("{base} + {offset}ull"),
            offset => format!("{base} - {}ull", offset.unsigned_abs()),
        })
    }

    /// The name of the helper for this form, defining it on first use.
    fn wgmma_helper(&mut self, n: u32, kind: &WgmmaKind, a: AForm, b: Major) -> String {
        let trans = |major: Major| u8::from(major == Major::MN);
        let form = match a {
            AForm::Shared(major) => format!("ss_t{}{}", trans(major), trans(b)),
            AForm::Registers => format!("rs_t{}", trans(b)),
        };
        let name = format!("tl_wgmma_m64n{n}k{}_{}_{form}", kind.depth, kind.suffix());
        if !self.helpers.contains_key(&name) {
            let text = helper_text(&name, n, kind, a, trans(b));
            self.helpers.insert(name.clone(), text);
        }
        name
    }
}

/// The form of a wgmma by its operand and accumulator types.
struct WgmmaKind {
    /// K per instruction: 16, 8 or 32.
    depth: u32,
    /// PTX's type names of A and B (`f16`, `tf32`, `e4m3`, `s8`, ...).
    a: &'static str,
    b: &'static str,
    /// Whether the accumulator is int32 (no scale immediates) rather than fp32.
    integer: bool,
}

impl WgmmaKind {
    fn of(a: Option<DType>, b: Option<DType>, c: Option<DType>) -> Option<WgmmaKind> {
        let name = |d: DType| match d {
            DType::Float16 => Some("f16"),
            DType::BFloat16 => Some("bf16"),
            DType::Float32 | DType::TFloat32 => Some("tf32"),
            DType::Float8E4M3 => Some("e4m3"),
            DType::Float8E5M2 => Some("e5m2"),
            DType::Int8 => Some("s8"),
            DType::UInt8 => Some("u8"),
            _ => None,
        };
        let (a, b, c) = (a?, b?, c?);
        let (x, y) = (name(a)?, name(b)?);
        let depth = match a.bytes() {
            2 => 16,
            4 => 8,
            _ => 32,
        };
        let integer = !a.is_float();
        let same_family = a.bytes() == b.bytes() && a.is_float() == b.is_float();
        // 16-bit and tf32 forms take one type for both operands; fp8 and integers may mix.
        let mixed_ok = depth == 32 || x == y;
        let accumulator = if integer {
            DType::Int32
        } else {
            DType::Float32
        };
        (same_family && mixed_ok && c == accumulator).then_some(WgmmaKind {
            depth,
            a: x,
            b: y,
            integer,
        })
    }

    /// The helper name's type part: `f16`, or `e4m3_e5m2` where A and B differ.
    fn suffix(&self) -> String {
        if self.a == self.b {
            self.a.to_owned()
        } else {
            format!("{}_{}", self.a, self.b)
        }
    }
}

/// Where a helper's A operand comes from.
#[derive(Clone, Copy)]
enum AForm {
    Shared(Major),
    Registers,
}

/// The definition of one wgmma helper.
fn helper_text(name: &str, n: u32, kind: &WgmmaKind, a: AForm, trans_b: u8) -> String {
    let registers = n / 2;
    let d_list = (0..registers)
        .map(|r| format!("%{r}"))
        .collect::<Vec<_>>()
        .join(", ");
    let (a_param, a_operands, a_inputs, next, trans_a) = match a {
        AForm::Shared(major) => (
            "unsigned long long a",
            format!("%{registers}"),
            "\"l\"(a)".to_owned(),
            registers + 1,
            Some(u8::from(major == Major::MN)),
        ),
        AForm::Registers => (
            "const void* a_registers",
            (registers..registers + 4)
                .map(|r| format!("%{r}"))
                .collect::<Vec<_>>()
                .join(", "),
            "\"r\"(x[0]), \"r\"(x[1]), \"r\"(x[2]), \"r\"(x[3])".to_owned(),
            registers + 4,
            None,
        ),
    };
    let (b_operand, scale) = (next, next + 1);
    // Scale immediates (1: no negation) for float forms; transpose immediates for 16-bit ones.
    let immediates = match (kind.integer, kind.depth, trans_a) {
        (true, _, _) => String::new(),
        (false, 16, Some(trans_a)) => format!(", 1, 1, {trans_a}, {trans_b}"),
        (false, 16, None) => format!(", 1, 1, {trans_b}"),
        (false, _, _) => ", 1, 1".to_owned(),
    };
    let (accumulator, constraint, d_type) = if kind.integer {
        ("int", "+r", "s32")
    } else {
        ("float", "+f", "f32")
    };
    let a_braced = match a {
        AForm::Shared(_) => a_operands,
        AForm::Registers => format!("{{{a_operands}}}"),
    };
    let mut text = String::new();
    let _ = writeln!(
        text,
        "__device__ __forceinline__ void {name}({accumulator}* d, {a_param}, unsigned long long b) {{"
    );
    if matches!(a, AForm::Registers) {
        let _ = writeln!(
            text,
            "    const unsigned int* x = (const unsigned int*)a_registers;"
        );
    }
    let _ = writeln!(text, "    asm volatile(");
    let _ = writeln!(
        text,
        "        \"{{ .reg .pred p; setp.ne.b32 p, %{scale}, 0; \""
    );
    let _ = writeln!(
        text,
        "        \"wgmma.mma_async.sync.aligned.m64n{n}k{}.{d_type}.{}.{} \"",
        kind.depth, kind.a, kind.b
    );
    let _ = writeln!(
        text,
        "        \"{{{d_list}}}, {a_braced}, %{b_operand}, p{immediates}; }}\""
    );
    let outputs = (0..registers)
        .map(|r| format!("\"{constraint}\"(d[{r}])"))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(text, "        : {outputs}");
    let _ = writeln!(text, "        : {a_inputs}, \"l\"(b), \"r\"(1));");
    let _ = writeln!(text, "}}");
    text
}
