//! Host tensors: the values a kernel reads and writes, kept as `f64` and rounded to their dtype.
//!
//! Every element type the kernels use (fp16, bf16, fp32, int8..int32, bool) is exactly representable in
//! an `f64`, so one representation serves the emulator, the inputs of a GPU launch and the comparison
//! of results. Conversion to and from device bytes happens only at the edges.

use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tilec_ir::DType;
pub use tilec_ir::dtype::round_to_tf32;

/// A dense row-major tensor on the host.
#[derive(Clone, Debug, PartialEq)]
pub struct HostTensor {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub values: Vec<f64>,
}

/// A vector of `count` values, or an error when memory cannot hold it: tensor sizes come from user
/// code, and an allocation that fails must be a message, not an abort.
/// How many random elements are made between two looks at the deadline: about a millisecond.
const DEADLINE_CHUNK: usize = 1 << 16;

/// Random index tensors (offsets, expert ids, block tables) take values in `0..INDEX_VALUES`: an
/// extent they index must be at least this large for every random index to be in range.
const INDEX_VALUES: i32 = 8;

/// Why [`HostTensor::random_before`] made no tensor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RandomError {
    /// The deadline passed while the tensor was filled.
    OutOfTime,
    /// The tensor cannot be held (its size overflows, or memory is short): the message says so.
    TooLarge(String),
}

impl RandomError {
    /// The error as the message the callers without a deadline report.
    pub fn into_message(self) -> String {
        match self {
            RandomError::OutOfTime => "the time to fill the inputs ran out".to_owned(),
            RandomError::TooLarge(message) => message,
        }
    }
}

fn allocate(count: usize) -> Result<Vec<f64>, String> {
    let mut values = Vec::new();
    values.try_reserve_exact(count).map_err(|_| {
        format!(
            "not enough memory for a tensor of {count} elements ({:.1} GiB on the host)",
            count as f64 * 8.0 / f64::from(1u32 << 30)
        )
    })?;
    Ok(values)
}

/// The element count of `shape`, or an error when it overflows.
fn element_count(shape: &[usize]) -> Result<usize, String> {
    shape
        .iter()
        .try_fold(1usize, |acc, &extent| acc.checked_mul(extent))
        .ok_or_else(|| format!("a tensor of shape {shape:?} has more elements than memory holds"))
}

impl HostTensor {
    pub fn zeros(dtype: DType, shape: &[usize]) -> HostTensor {
        HostTensor {
            dtype,
            shape: shape.to_vec(),
            values: vec![0.0; shape.iter().product()],
        }
    }

    /// [`HostTensor::zeros`] for a shape from user code: an error when memory cannot hold it.
    pub fn try_zeros(dtype: DType, shape: &[usize]) -> Result<HostTensor, String> {
        let count = element_count(shape)?;
        let mut values = allocate(count)?;
        values.resize(count, 0.0);
        Ok(HostTensor {
            dtype,
            shape: shape.to_vec(),
            values,
        })
    }

    /// Uniform random values in [-1, 1) for floats and [-8, 8) for integers, rounded to `dtype`; the
    /// same seed always gives the same tensor.
    pub fn random(dtype: DType, shape: &[usize], seed: u64) -> HostTensor {
        match Self::try_random(dtype, shape, seed) {
            Ok(tensor) => tensor,
            Err(message) => panic!("{message}"),
        }
    }

    /// [`HostTensor::random`] for a shape from user code: an error when memory cannot hold it.
    pub fn try_random(dtype: DType, shape: &[usize], seed: u64) -> Result<HostTensor, String> {
        Self::random_in(dtype, shape, seed, -8..8, None).map_err(RandomError::into_message)
    }

    /// Random values as [`HostTensor::try_random`] (with `indices`, integers in [0, 8): for a
    /// tensor the kernel reads indices from, whose negative values would only exercise the bounds
    /// guards), or [`RandomError::OutOfTime`] once `deadline` has passed: filling
    /// a tensor of a hundred million elements takes seconds, which a caller with a time budget
    /// (`tilec run --emulator-budget`, `tilec watch`) must not wait for.
    pub fn random_before(
        dtype: DType,
        shape: &[usize],
        (seed, indices): (u64, bool),
        deadline: Option<Instant>,
    ) -> Result<HostTensor, RandomError> {
        let integers = if indices { 0..INDEX_VALUES } else { -8..8 };
        Self::random_in(dtype, shape, seed, integers, deadline)
    }

    fn random_in(
        dtype: DType,
        shape: &[usize],
        seed: u64,
        integers: std::ops::Range<i32>,
        deadline: Option<Instant>,
    ) -> Result<HostTensor, RandomError> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let count = element_count(shape).map_err(RandomError::TooLarge)?;
        let mut values = allocate(count).map_err(RandomError::TooLarge)?;
        while values.len() < count {
            if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                return Err(RandomError::OutOfTime);
            }
            let chunk = (count - values.len()).min(DEADLINE_CHUNK);
            values.extend((0..chunk).map(|_| {
                let raw = if dtype.is_float() {
                    rng.gen_range(-1.0..1.0)
                } else if dtype == DType::Bool {
                    f64::from(u8::from(rng.gen_bool(0.5)))
                } else {
                    f64::from(rng.gen_range(integers.clone()))
                };
                round_to(dtype, raw)
            }));
        }
        Ok(HostTensor {
            dtype,
            shape: shape.to_vec(),
            values,
        })
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The elements as the device stores them (little endian; 4-bit elements two a byte, the
    /// element of even index in the low nibble).
    pub fn to_bytes(&self) -> Vec<u8> {
        if self.dtype.is_sub_byte() {
            return self
                .values
                .chunks(2)
                .map(|pair| {
                    let low = nibble_code(self.dtype, pair[0]);
                    let high = pair
                        .get(1)
                        .map_or(0, |&value| nibble_code(self.dtype, value));
                    low | (high << 4)
                })
                .collect();
        }
        let mut bytes = Vec::with_capacity(self.values.len() * element_bytes(self.dtype));
        for &value in &self.values {
            push_element(&mut bytes, self.dtype, value);
        }
        bytes
    }

    /// Reads elements stored as the device stores them; `None` when the byte count does not match.
    pub fn from_bytes(dtype: DType, shape: &[usize], bytes: &[u8]) -> Option<HostTensor> {
        let count: usize = shape.iter().product();
        if Some(bytes.len()) != storage_bytes(dtype, count) {
            return None;
        }
        let values = if dtype.is_sub_byte() {
            (0..count)
                .map(|i| nibble_value(dtype, (bytes[i / 2] >> (4 * (i % 2))) & 0xf))
                .collect()
        } else {
            bytes
                .chunks_exact(element_bytes(dtype))
                .map(|chunk| read_element(dtype, chunk))
                .collect()
        };
        Some(HostTensor {
            dtype,
            shape: shape.to_vec(),
            values,
        })
    }
}

/// The size of one element on the device, in bytes: one for the 4-bit types, whose elements
/// share bytes in memory (see [`storage_bytes`] for the size of a tensor).
pub fn element_bytes(dtype: DType) -> usize {
    usize::try_from(dtype.bytes()).unwrap_or(usize::MAX)
}

/// The bytes `count` elements of `dtype` take on the device, packed as it stores them; `None` when
/// the size overflows.
pub fn storage_bytes(dtype: DType, count: usize) -> Option<usize> {
    let bits = count.checked_mul(usize::try_from(dtype.bits()).ok()?)?;
    Some(bits.div_ceil(8))
}

/// The four bits an element of a 4-bit type is stored as (its value is one of the type's).
// The casts wrap an integer element into its nibble, which is the store being modelled.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn nibble_code(dtype: DType, value: f64) -> u8 {
    if dtype == DType::Float4E2M1 {
        tilec_ir::dtype::e2m1_code(value)
    } else {
        (value as i64 as u8) & 0xf
    }
}

/// The element a nibble (the low four bits of `code`) stores, as [`nibble_code`] wrote it.
fn nibble_value(dtype: DType, code: u8) -> f64 {
    match dtype {
        DType::Float4E2M1 => tilec_ir::dtype::e2m1_value(code),
        DType::Int4 => f64::from((code << 4).cast_signed() >> 4),
        _ => f64::from(code & 0xf),
    }
}

/// `value` as the nearest value of `dtype` (round to nearest even for floats; integers wrap as in C).
// The casts are the conversions modelled: `as f32` rounds to nearest even, and an integer is
// wrapped to its type's width through i64.
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap
)]
pub fn round_to(dtype: DType, value: f64) -> f64 {
    match dtype {
        DType::Float64 => value,
        DType::Float32 => f64::from(value as f32),
        DType::TFloat32 => round_to_tf32(value),
        DType::Float16 => half::f16::from_f64(value).to_f64(),
        DType::BFloat16 => half::bf16::from_f64(value).to_f64(),
        DType::Float8E4M3 | DType::Float8E5M2 => decode_fp8(dtype, encode_fp8(dtype, value)),
        DType::Bool => f64::from(u8::from(value != 0.0)),
        DType::Int8 => f64::from(value as i64 as i8),
        DType::Int16 => f64::from(value as i64 as i16),
        DType::Int32 => f64::from(value as i64 as i32),
        DType::Int64 => value.trunc(),
        DType::UInt8 => f64::from(value as i64 as u8),
        DType::UInt16 => f64::from(value as i64 as u16),
        DType::UInt32 => f64::from(value as i64 as u32),
        DType::UInt64 => value.trunc().max(0.0),
        DType::Int4 => f64::from(((value as i64 as u8) << 4).cast_signed() >> 4),
        DType::UInt4 => f64::from((value as i64 as u8) & 0xf),
        DType::Float4E2M1 => tilec_ir::dtype::round_to_e2m1(value),
    }
}

/// The value of an fp8 code: e4m3 is the `fn` variant (no infinities, 0x7f is NaN), e5m2 is IEEE-like.
fn decode_fp8(dtype: DType, code: u8) -> f64 {
    let (exponent_bits, bias) = if dtype == DType::Float8E4M3 {
        (4, 7)
    } else {
        (5, 15)
    };
    let mantissa_bits = 7 - exponent_bits;
    let sign = if code & 0x80 != 0 { -1.0 } else { 1.0 };
    let exponent = i32::from((code & 0x7f) >> mantissa_bits);
    let mantissa = f64::from(code & ((1 << mantissa_bits) - 1));
    let scale = f64::from(1u32 << mantissa_bits);
    let max_exponent = (1 << exponent_bits) - 1;
    if dtype == DType::Float8E4M3 && code & 0x7f == 0x7f {
        return f64::NAN;
    }
    if dtype == DType::Float8E5M2 && exponent == max_exponent {
        return if mantissa == 0.0 {
            sign * f64::INFINITY
        } else {
            f64::NAN
        };
    }
    if exponent == 0 {
        sign * mantissa / scale * 2f64.powi(1 - bias)
    } else {
        sign * (1.0 + mantissa / scale) * 2f64.powi(exponent - bias)
    }
}

/// The fp8 code nearest to `value` (ties to the even code), saturating at the largest finite value.
fn encode_fp8(dtype: DType, value: f64) -> u8 {
    if value.is_nan() {
        return 0x7f;
    }
    let sign = if value.is_sign_negative() { 0x80 } else { 0 };
    // Saturate, as `cvt.rn.satfinite` does: at and past the largest finite value (infinities
    // included) the nearest-value search below would see equal distances to every code once the
    // value dwarfs them, and pick the wrong one.
    // The largest finite codes: e4m3 (the `fn` variant) 448 = 0x7e, e5m2 57344 = 0x7b.
    let largest = if dtype == DType::Float8E5M2 {
        0x7b
    } else {
        0x7e
    };
    if value.abs() >= decode_fp8(dtype, largest) {
        return sign | largest;
    }
    let mut best = 0u8;
    let mut best_error = f64::INFINITY;
    for code in 0..0x80u8 {
        let candidate = decode_fp8(dtype, code);
        if !candidate.is_finite() {
            continue;
        }
        let error = (candidate - value.abs()).abs();
        if error < best_error || (error == best_error && code % 2 == 0) {
            best = code;
            best_error = error;
        }
    }
    sign | best
}

/// The `to` whose bytes are those of `value` stored as a `from` (`T.reinterpret`; the widths
/// agree, which the front end checks).
pub fn reinterpret_bits(from: DType, to: DType, value: f64) -> f64 {
    let mut bytes = Vec::with_capacity(8);
    push_element(&mut bytes, from, value);
    read_element(to, &bytes)
}

// The casts are the stores modelled: a value already of `dtype` keeps its bits (an integer is
// wrapped to its width through i64, as the store of a wider register would).
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap
)]
fn push_element(bytes: &mut Vec<u8>, dtype: DType, value: f64) {
    match dtype {
        DType::Float64 => bytes.extend_from_slice(&value.to_le_bytes()),
        DType::Float32 | DType::TFloat32 => {
            bytes.extend_from_slice(&(value as f32).to_le_bytes());
        }
        DType::Float16 => bytes.extend_from_slice(&half::f16::from_f64(value).to_le_bytes()),
        DType::Float8E4M3 | DType::Float8E5M2 => bytes.push(encode_fp8(dtype, value)),
        DType::BFloat16 => bytes.extend_from_slice(&half::bf16::from_f64(value).to_le_bytes()),
        DType::Bool | DType::UInt8 => bytes.push(value as i64 as u8),
        DType::Int8 => bytes.extend_from_slice(&(value as i64 as i8).to_le_bytes()),
        DType::Int16 => bytes.extend_from_slice(&(value as i64 as i16).to_le_bytes()),
        DType::UInt16 => bytes.extend_from_slice(&(value as i64 as u16).to_le_bytes()),
        DType::Int32 => bytes.extend_from_slice(&(value as i64 as i32).to_le_bytes()),
        DType::UInt32 => bytes.extend_from_slice(&(value as i64 as u32).to_le_bytes()),
        DType::Int64 => bytes.extend_from_slice(&(value as i64).to_le_bytes()),
        DType::UInt64 => bytes.extend_from_slice(&(value as u64).to_le_bytes()),
        // A 4-bit element alone (a `T.reinterpret` of one) is its nibble in a byte of its own.
        DType::Int4 | DType::UInt4 | DType::Float4E2M1 => bytes.push(nibble_code(dtype, value)),
    }
}

fn read_element(dtype: DType, chunk: &[u8]) -> f64 {
    let mut buf = [0u8; 8];
    buf[..chunk.len()].copy_from_slice(chunk);
    let [b0, b1, b2, b3, ..] = buf;
    match dtype {
        DType::Float64 => f64::from_le_bytes(buf),
        DType::Float32 | DType::TFloat32 => f64::from(f32::from_le_bytes([b0, b1, b2, b3])),
        DType::Float16 => half::f16::from_le_bytes([b0, b1]).to_f64(),
        DType::Float8E4M3 | DType::Float8E5M2 => decode_fp8(dtype, b0),
        DType::BFloat16 => half::bf16::from_le_bytes([b0, b1]).to_f64(),
        DType::Bool | DType::UInt8 => f64::from(b0),
        DType::Int8 => f64::from(i8::from_le_bytes([b0])),
        DType::Int16 => f64::from(i16::from_le_bytes([b0, b1])),
        DType::UInt16 => f64::from(u16::from_le_bytes([b0, b1])),
        DType::Int32 => f64::from(i32::from_le_bytes([b0, b1, b2, b3])),
        DType::UInt32 => f64::from(u32::from_le_bytes([b0, b1, b2, b3])),
        DType::Int64 => i64::from_le_bytes(buf) as f64,
        DType::UInt64 => u64::from_le_bytes(buf) as f64,
        DType::Int4 | DType::UInt4 | DType::Float4E2M1 => nibble_value(dtype, b0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_for_every_dtype() {
        for dtype in DType::ALL {
            let tensor = HostTensor::random(dtype, &[3, 5], 7);
            let bytes = tensor.to_bytes();
            let expected = if dtype.is_sub_byte() {
                8
            } else {
                15 * element_bytes(dtype)
            };
            assert_eq!(bytes.len(), expected, "{dtype:?}");
            assert_eq!(
                HostTensor::from_bytes(dtype, &[3, 5], &bytes),
                Some(tensor),
                "{dtype:?}"
            );
        }
    }

    /// 4-bit elements pack two a byte, the element of even index in the low nibble (torch's
    /// packed order); int4 sign-extends, float4_e2m1fn decodes its sign bit.
    #[test]
    fn four_bit_elements_pack_low_nibble_first() {
        let int4 = HostTensor {
            dtype: DType::Int4,
            shape: vec![3],
            values: vec![-1.0, 7.0, -8.0],
        };
        assert_eq!(int4.to_bytes(), vec![0x7f, 0x08]);
        let fp4 = HostTensor {
            dtype: DType::Float4E2M1,
            shape: vec![2],
            values: vec![6.0, -0.5],
        };
        assert_eq!(fp4.to_bytes(), vec![0x97]);
        assert_eq!(
            HostTensor::from_bytes(DType::Float4E2M1, &[2], &[0x97]),
            Some(fp4)
        );
        assert_eq!(round_to(DType::Int4, 9.0), -7.0);
        assert_eq!(round_to(DType::UInt4, -1.0), 15.0);
        assert_eq!(round_to(DType::Float4E2M1, -2.6), -3.0);
    }

    #[test]
    fn rounding_matches_the_formats() {
        assert_eq!(round_to(DType::Float16, 1.0 + 1.0 / 4096.0), 1.0);
        assert_eq!(round_to(DType::BFloat16, 1.0 + 1.0 / 256.0), 1.0);
        assert_eq!(round_to(DType::Int8, 200.0), -56.0);
        assert_eq!(
            HostTensor::random(DType::Float32, &[4], 1),
            HostTensor::random(DType::Float32, &[4], 1)
        );
    }

    /// fp8 narrowing saturates at the largest finite value, as `cvt.rn.satfinite` does, however
    /// large the value: a value that dwarfs every code (1e38, infinity) gave e5m2 49152 before.
    #[test]
    fn fp8_saturates_at_the_largest_finite_value() {
        for (dtype, largest) in [(DType::Float8E4M3, 448.0), (DType::Float8E5M2, 57344.0)] {
            for value in [largest, largest * 1.1, 1e6, 1e38, f64::INFINITY] {
                assert_eq!(round_to(dtype, value), largest, "{dtype:?} {value}");
                assert_eq!(round_to(dtype, -value), -largest, "{dtype:?} -{value}");
            }
            assert!(round_to(dtype, f64::NAN).is_nan());
        }
        assert_eq!(round_to(DType::Float8E4M3, 464.0), 448.0);
        assert_eq!(round_to(DType::Float8E5M2, 61440.0), 57344.0);
        assert_eq!(round_to(DType::Float8E5M2, 1.125), 1.0);
        assert_eq!(round_to(DType::Float8E4M3, 1.0625), 1.0);
        assert_eq!(round_to(DType::Float8E4M3, 1.1875), 1.25);
    }
}
