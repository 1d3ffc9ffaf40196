//! Hopper's warpgroup statements: `wgmma.mma_async` with its fences and groups, and the proxy
//! fence that makes generic shared-memory writes visible to it.
//!
//! Each distinct `wgmma` form (shape, operand type, where A comes from, which operands are
//! transposed) gets one helper function of its own in front of the kernel: the inline PTX names
//! every accumulator register as an operand (`n / 2` of them), so the text depends on the shape.
//! Accumulators are passed by pointer to their first register; after unrolling every index is a
//! constant, so they stay in registers, as with `mma.sync`.

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
        let suffix = match (
            dtype(self, a_buffer),
            dtype(self, b.buffer),
            dtype(self, c.0),
        ) {
            (Some(DType::Float16), Some(DType::Float16), Some(DType::Float32)) => "f16",
            (Some(DType::BFloat16), Some(DType::BFloat16), Some(DType::Float32)) => "bf16",
            _ => {
                return self
                    .skip("a wgmma whose operands are not fp16 or bf16 with an fp32 accumulator");
            }
        };
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
        let name = self.wgmma_helper(n, suffix, a_form, b.layout.major);
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
    fn wgmma_helper(&mut self, n: u32, suffix: &str, a: AForm, b: Major) -> String {
        let trans = |major: Major| u8::from(major == Major::MN);
        let form = match a {
            AForm::Shared(major) => format!("ss_t{}{}", trans(major), trans(b)),
            AForm::Registers => format!("rs_t{}", trans(b)),
        };
        let name = format!("tl_wgmma_m64n{n}k16_{suffix}_{form}");
        if !self.helpers.contains_key(&name) {
            let text = helper_text(&name, n, suffix, a, trans(b));
            self.helpers.insert(name.clone(), text);
        }
        name
    }
}

/// Where a helper's A operand comes from.
#[derive(Clone, Copy)]
enum AForm {
    Shared(Major),
    Registers,
}

/// The definition of one wgmma helper.
fn helper_text(name: &str, n: u32, suffix: &str, a: AForm, trans_b: u8) -> String {
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
    let immediates = match trans_a {
        Some(trans_a) => format!("1, 1, {trans_a}, {trans_b}"),
        None => format!("1, 1, {trans_b}"),
    };
    let a_braced = match a {
        AForm::Shared(_) => a_operands,
        AForm::Registers => format!("{{{a_operands}}}"),
    };
    let mut text = String::new();
    let _ = writeln!(
        text,
        "__device__ __forceinline__ void {name}(float* d, {a_param}, unsigned long long b) {{"
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
        "        \"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{suffix}.{suffix} \""
    );
    let _ = writeln!(
        text,
        "        \"{{{d_list}}}, {a_braced}, %{b_operand}, p, {immediates}; }}\""
    );
    let outputs = (0..registers)
        .map(|r| format!("\"+f\"(d[{r}])"))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(text, "        : {outputs}");
    let _ = writeln!(text, "        : {a_inputs}, \"l\"(b), \"r\"(1));");
    let _ = writeln!(text, "}}");
    text
}
