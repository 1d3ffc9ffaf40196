//! NumPy `.npy` files for host tensors: `--save` writes kernel outputs that Python can `np.load`, and
//! expected results produced by NumPy or PyTorch are read back for comparison.
//!
//! Hand-written rather than taken from a crate: the format is a magic string, a version, a length and
//! a Python dict literal followed by the raw elements, a hundred-odd lines. The maintained crate,
//! `npyz`, parses that dict with a general Python-literal parser (`py_literal`, built on `pest`,
//! `num-bigint` and `num-complex`), which is more code and compile time than the whole format, and it
//! would still need our own mapping for bf16 and fp8, which NumPy has no type for.
//!
//! Writing follows `numpy.save` byte for byte (format 1.0, little endian, C order, the header padded
//! with spaces to a multiple of 64 bytes and ended by a newline). bfloat16 and fp8 tensors are written
//! as float32, which holds their values exactly. Reading accepts formats 1.0 to 3.0, either byte order
//! and Fortran order, for the descriptors this module writes.

use std::io;
use std::path::Path;

use tilec_ir::DType;

use crate::tensor::{HostTensor, element_bytes};

const MAGIC: &[u8] = b"\x93NUMPY";

/// The NumPy type descriptor a tensor of `dtype` is written with (bf16 and fp8 as float32).
///
/// One-byte types carry `|` (byte order not applicable), as NumPy writes them.
pub fn descriptor(dtype: DType) -> &'static str {
    match dtype {
        DType::Bool => "|b1",
        DType::Int8 | DType::Int4 => "|i1",
        DType::Int16 => "<i2",
        DType::Int32 => "<i4",
        DType::Int64 => "<i8",
        DType::UInt8 | DType::UInt4 => "|u1",
        DType::UInt16 => "<u2",
        DType::UInt32 => "<u4",
        DType::UInt64 => "<u8",
        DType::Float16 => "<f2",
        DType::Float32
        | DType::BFloat16
        | DType::Float8E4M3
        | DType::Float8E5M2
        | DType::TFloat32
        | DType::Float4E2M1 => "<f4",
        DType::Float64 => "<f8",
    }
}

/// The dtype an `.npy` file of `tensor` reads back as: the tensor's own, except bf16 and fp8.
pub fn stored_dtype(dtype: DType) -> DType {
    match dtype {
        DType::BFloat16
        | DType::Float8E4M3
        | DType::Float8E5M2
        | DType::TFloat32
        | DType::Float4E2M1 => DType::Float32,
        DType::Int4 => DType::Int8,
        DType::UInt4 => DType::UInt8,
        other => other,
    }
}

/// The complete contents of an `.npy` file holding `tensor`.
pub fn to_npy_bytes(tensor: &HostTensor) -> Vec<u8> {
    let shape = match tensor.shape.as_slice() {
        [] => "()".to_string(),
        [extent] => format!("({extent},)"),
        extents => {
            let parts: Vec<String> = extents.iter().map(usize::to_string).collect();
            format!("({})", parts.join(", "))
        }
    };
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
        descriptor(tensor.dtype)
    );
    // NumPy pads so that the data starts at a multiple of 64 bytes, which keeps it aligned for
    // memory mapping; format 2.0 (a 4-byte length) is only for headers longer than 65535 bytes.
    let preamble = if header.len() + 1 + 10 <= usize::from(u16::MAX) {
        10
    } else {
        12
    };
    let padding = (64 - (preamble + header.len() + 1) % 64) % 64;
    header.extend(std::iter::repeat_n(' ', padding));
    header.push('\n');

    let stored = stored_dtype(tensor.dtype);
    let data = if stored == tensor.dtype {
        tensor.to_bytes()
    } else {
        HostTensor {
            dtype: stored,
            shape: tensor.shape.clone(),
            values: tensor.values.clone(),
        }
        .to_bytes()
    };
    let mut bytes = Vec::with_capacity(preamble + header.len() + data.len());
    bytes.extend_from_slice(MAGIC);
    match u16::try_from(header.len()) {
        Ok(length) if preamble == 10 => {
            bytes.extend_from_slice(&[1, 0]);
            bytes.extend_from_slice(&length.to_le_bytes());
        }
        _ => {
            bytes.extend_from_slice(&[2, 0]);
            let length = u32::try_from(header.len()).unwrap_or(u32::MAX);
            bytes.extend_from_slice(&length.to_le_bytes());
        }
    }
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(&data);
    bytes
}

/// Writes `tensor` to `path` as an `.npy` file.
pub fn write_npy(path: &Path, tensor: &HostTensor) -> io::Result<()> {
    let count = tensor
        .shape
        .iter()
        .try_fold(1usize, |count, &extent| count.checked_mul(extent));
    if count != Some(tensor.values.len()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "cannot write {}: the tensor has {} values for shape {:?}",
                path.display(),
                tensor.values.len(),
                tensor.shape
            ),
        ));
    }
    std::fs::write(path, to_npy_bytes(tensor))
}

/// Reads an `.npy` file; a malformed or unsupported file is an `InvalidData` error that names the
/// path and the problem.
pub fn read_npy(path: &Path) -> io::Result<HostTensor> {
    let bytes = std::fs::read(path)?;
    from_npy_bytes(&bytes).map_err(|problem| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {problem}", path.display()),
        )
    })
}

/// Parses the contents of an `.npy` file.
pub fn from_npy_bytes(bytes: &[u8]) -> Result<HostTensor, String> {
    let rest = bytes
        .strip_prefix(MAGIC)
        .ok_or("not a .npy file (no \\x93NUMPY magic)")?;
    let (header, data) = match rest {
        [1, 0, l0, l1, rest @ ..] => {
            split_header(rest, usize::from(u16::from_le_bytes([*l0, *l1])))?
        }
        [major @ (2 | 3), 0, l0, l1, l2, l3, rest @ ..] => {
            let length = u32::from_le_bytes([*l0, *l1, *l2, *l3]);
            let length = usize::try_from(length).map_err(|_| "the header is too long")?;
            let (header, data) = split_header(rest, length)?;
            if *major == 3 {
                std::str::from_utf8(header).map_err(|_| "the header is not UTF-8")?;
            }
            (header, data)
        }
        [major, minor, ..] => {
            return Err(format!("unsupported .npy format version {major}.{minor}"));
        }
        _ => return Err("the file ends inside the preamble".to_string()),
    };
    // Versions 1 and 2 store the header as latin-1; every character that matters is ASCII.
    let header: String = header.iter().map(|&byte| char::from(byte)).collect();
    let fields = Header::parse(&header)?;
    let (dtype, big_endian) = parse_descriptor(&fields.descr)?;

    let size = element_bytes(dtype);
    let count = fields
        .shape
        .iter()
        .try_fold(1usize, |count, &extent| count.checked_mul(extent))
        .ok_or("the shape is too large")?;
    let expected = count.checked_mul(size).ok_or("the shape is too large")?;
    if data.len() != expected {
        return Err(format!(
            "the data holds {} bytes, but shape {:?} of {} needs {expected}",
            data.len(),
            fields.shape,
            fields.descr
        ));
    }
    let mut data = data.to_vec();
    if big_endian && size > 1 {
        data.chunks_exact_mut(size).for_each(<[u8]>::reverse);
    }
    let mut tensor = HostTensor::from_bytes(dtype, &fields.shape, &data)
        .ok_or("the data does not match the shape")?;
    if dtype == DType::Bool {
        // NumPy treats any nonzero byte as true.
        tensor
            .values
            .iter_mut()
            .for_each(|value| *value = f64::from(u8::from(*value != 0.0)));
    }
    if fields.fortran_order {
        tensor.values = fortran_to_c_order(&tensor.values, &fields.shape);
    }
    Ok(tensor)
}

fn split_header(rest: &[u8], length: usize) -> Result<(&[u8], &[u8]), String> {
    if rest.len() < length {
        return Err("the file ends inside the header".to_string());
    }
    Ok(rest.split_at(length))
}

/// The dtype of a descriptor such as `<f4`, and whether its elements are big endian.
fn parse_descriptor(descr: &str) -> Result<(DType, bool), String> {
    let (order, kind) = match descr.chars().next() {
        Some(order @ ('<' | '>' | '|' | '=')) => (order, &descr[1..]),
        _ => ('=', descr),
    };
    let dtype = match kind {
        "b1" => DType::Bool,
        "i1" => DType::Int8,
        "i2" => DType::Int16,
        "i4" => DType::Int32,
        "i8" => DType::Int64,
        "u1" => DType::UInt8,
        "u2" => DType::UInt16,
        "u4" => DType::UInt32,
        "u8" => DType::UInt64,
        "f2" => DType::Float16,
        "f4" => DType::Float32,
        "f8" => DType::Float64,
        _ => return Err(format!("unsupported element type '{descr}'")),
    };
    let big_endian = order == '>' || (order == '=' && cfg!(target_endian = "big"));
    Ok((dtype, big_endian))
}

/// Reorders elements stored first-index-fastest into row-major order.
fn fortran_to_c_order(values: &[f64], shape: &[usize]) -> Vec<f64> {
    let mut c_strides = vec![1usize; shape.len()];
    for axis in (0..shape.len().saturating_sub(1)).rev() {
        c_strides[axis] = c_strides[axis + 1] * shape[axis + 1];
    }
    let mut reordered = vec![0.0; values.len()];
    for (fortran_index, &value) in values.iter().enumerate() {
        let mut remainder = fortran_index;
        let mut c_index = 0;
        for (axis, &extent) in shape.iter().enumerate() {
            c_index += (remainder % extent) * c_strides[axis];
            remainder /= extent;
        }
        reordered[c_index] = value;
    }
    reordered
}

/// The three keys of an `.npy` header dict.
#[derive(Debug, PartialEq)]
struct Header {
    descr: String,
    fortran_order: bool,
    shape: Vec<usize>,
}

impl Header {
    /// Parses `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`: the subset of Python
    /// literal syntax that NumPy writes (strings, booleans, tuples of integers).
    fn parse(text: &str) -> Result<Header, String> {
        let mut parser = LiteralParser {
            text: text.as_bytes(),
            at: 0,
        };
        let (mut descr, mut fortran_order, mut shape) = (None, None, None);
        parser.expect(b'{')?;
        while !parser.eat(b'}') {
            let key = parser.string()?;
            parser.expect(b':')?;
            match key.as_str() {
                "descr" => descr = Some(parser.string()?),
                "fortran_order" => fortran_order = Some(parser.boolean()?),
                "shape" => shape = Some(parser.integer_tuple()?),
                _ => return Err(format!("unexpected key '{key}' in the header")),
            }
            if !parser.eat(b',') {
                parser.expect(b'}')?;
                break;
            }
        }
        let missing = |key: &str| format!("the header has no '{key}'");
        Ok(Header {
            descr: descr.ok_or_else(|| missing("descr"))?,
            fortran_order: fortran_order.ok_or_else(|| missing("fortran_order"))?,
            shape: shape.ok_or_else(|| missing("shape"))?,
        })
    }
}

struct LiteralParser<'a> {
    text: &'a [u8],
    at: usize,
}

impl LiteralParser<'_> {
    fn skip_space(&mut self) {
        while self.text.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
    }

    /// Consumes `byte` (after spaces) if it is next.
    fn eat(&mut self, byte: u8) -> bool {
        self.skip_space();
        let found = self.text.get(self.at) == Some(&byte);
        if found {
            self.at += 1;
        }
        found
    }

    fn expect(&mut self, byte: u8) -> Result<(), String> {
        if self.eat(byte) {
            Ok(())
        } else {
            Err(format!(
                "malformed header: expected '{}' at byte {}",
                char::from(byte),
                self.at
            ))
        }
    }

    fn string(&mut self) -> Result<String, String> {
        self.skip_space();
        let quote = match self.text.get(self.at) {
            Some(&quote @ (b'\'' | b'"')) => quote,
            _ => {
                return Err(format!(
                    "malformed header: expected a string at byte {}",
                    self.at
                ));
            }
        };
        let start = self.at + 1;
        let length = self.text[start..]
            .iter()
            .position(|&byte| byte == quote)
            .ok_or("malformed header: unterminated string")?;
        self.at = start + length + 1;
        Ok(String::from_utf8_lossy(&self.text[start..start + length]).into_owned())
    }

    fn word(&mut self) -> &[u8] {
        self.skip_space();
        let start = self.at;
        while self
            .text
            .get(self.at)
            .is_some_and(|byte| byte.is_ascii_alphanumeric())
        {
            self.at += 1;
        }
        &self.text[start..self.at]
    }

    fn boolean(&mut self) -> Result<bool, String> {
        match self.word() {
            b"True" => Ok(true),
            b"False" => Ok(false),
            _ => Err("malformed header: 'fortran_order' is not True or False".to_string()),
        }
    }

    fn integer_tuple(&mut self) -> Result<Vec<usize>, String> {
        self.expect(b'(')?;
        let mut values = Vec::new();
        while !self.eat(b')') {
            // Python 2 wrote long integers with an `L` suffix.
            let word = self.word();
            let digits = word.strip_suffix(b"L").unwrap_or(word);
            let value = std::str::from_utf8(digits)
                .ok()
                .and_then(|digits| digits.parse::<usize>().ok())
                .ok_or("malformed header: a shape extent is not a non-negative integer")?;
            values.push(value);
            if !self.eat(b',') {
                self.expect(b')')?;
                break;
            }
        }
        Ok(values)
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    /// A fresh directory under the system temp dir, removed when dropped.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(label: &str) -> TempDir {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |elapsed| elapsed.as_nanos());
            let path = std::env::temp_dir()
                .join(format!("tilec-npy-{label}-{}-{nanos}", std::process::id()));
            std::fs::create_dir_all(&path).expect("create the temp dir");
            TempDir(path)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn header_bytes_match_numpy() {
        let tensor = HostTensor {
            dtype: DType::Float32,
            shape: vec![2, 3],
            values: vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.5],
        };
        let bytes = to_npy_bytes(&tensor);
        // What numpy.save writes for np.array([[0, 1, 2], [3, 4, 5.5]], dtype='<f4'): a 10-byte
        // preamble and a 118-byte header (59 bytes of dict, 58 spaces, a newline), 128 in all.
        let dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
        let mut expected = b"\x93NUMPY\x01\x00\x76\x00".to_vec();
        expected.extend_from_slice(dict.as_bytes());
        expected.extend_from_slice(&[b' '; 58]);
        expected.push(b'\n');
        assert_eq!(expected.len(), 128);
        assert_eq!(&bytes[..128], expected.as_slice());
        assert_eq!(&bytes[128..132], &0.0f32.to_le_bytes());
        assert_eq!(&bytes[148..152], &5.5f32.to_le_bytes());
        assert_eq!(bytes.len(), 128 + 6 * 4);
    }

    #[test]
    fn shapes_of_rank_zero_and_one_are_python_tuples() {
        let scalar = to_npy_bytes(&HostTensor {
            dtype: DType::Int32,
            shape: vec![],
            values: vec![7.0],
        });
        assert!(String::from_utf8_lossy(&scalar).contains("'shape': (), }"));
        let vector = to_npy_bytes(&HostTensor::zeros(DType::UInt8, &[5]));
        assert!(
            String::from_utf8_lossy(&vector)
                .contains("'descr': '|u1', 'fortran_order': False, 'shape': (5,), }")
        );
        for bytes in [scalar, vector] {
            let header_end = bytes
                .iter()
                .position(|&byte| byte == b'\n')
                .expect("the header ends in a newline")
                + 1;
            assert_eq!(header_end % 64, 0);
        }
    }

    #[test]
    fn round_trip_through_files() {
        let dir = TempDir::new("round-trip");
        let dtypes = [
            DType::Bool,
            DType::Int8,
            DType::Int16,
            DType::Int32,
            DType::Int64,
            DType::UInt8,
            DType::UInt32,
            DType::Float16,
            DType::Float32,
            DType::Float64,
        ];
        for (seed, dtype) in dtypes.into_iter().enumerate() {
            for shape in [vec![3, 4], vec![5], vec![], vec![2, 0, 3]] {
                let tensor = HostTensor::random(dtype, &shape, seed as u64);
                let path = dir.0.join(format!("{dtype}-{}.npy", shape.len()));
                write_npy(&path, &tensor).expect("write");
                assert_eq!(
                    read_npy(&path).expect("read back"),
                    tensor,
                    "{dtype} {shape:?}"
                );
            }
        }
    }

    #[test]
    fn bfloat16_and_fp8_are_stored_as_float32() {
        let dir = TempDir::new("bf16");
        for dtype in [DType::BFloat16, DType::Float8E4M3, DType::Float8E5M2] {
            let tensor = HostTensor::random(dtype, &[4, 2], 3);
            let path = dir.0.join(format!("{dtype}.npy"));
            write_npy(&path, &tensor).expect("write");
            let back = read_npy(&path).expect("read back");
            assert_eq!(back.dtype, DType::Float32);
            assert_eq!((back.shape, back.values), (tensor.shape, tensor.values));
        }
    }

    #[test]
    fn reads_big_endian_fortran_order_and_version_two() {
        // np.save(f, np.arange(6, dtype='>i2').reshape(2, 3).T) with the header rewritten as 2.0.
        let header = "{'descr': '>i2', 'fortran_order': True, 'shape': (3, 2), }\n";
        let mut bytes = b"\x93NUMPY\x02\x00".to_vec();
        let header_len = u32::try_from(header.len()).expect("a short header");
        bytes.extend_from_slice(&header_len.to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        // The transpose of [[0, 1, 2], [3, 4, 5]] is F-contiguous: memory order 0..6.
        for value in 0i16..6 {
            bytes.extend_from_slice(&value.to_be_bytes());
        }
        let tensor = from_npy_bytes(&bytes).expect("a valid file");
        assert_eq!(tensor.dtype, DType::Int16);
        assert_eq!(tensor.shape, vec![3, 2]);
        assert_eq!(tensor.values, vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    }

    #[test]
    fn malformed_files_are_described() {
        assert!(
            from_npy_bytes(b"PK\x03\x04")
                .expect_err("not npy")
                .contains("magic")
        );
        let mut truncated = to_npy_bytes(&HostTensor::zeros(DType::Float64, &[4]));
        truncated.pop();
        assert!(
            from_npy_bytes(&truncated)
                .expect_err("truncated")
                .contains("needs 32")
        );
        let header = "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }\n";
        let mut complex = b"\x93NUMPY\x01\x00".to_vec();
        let header_len = u16::try_from(header.len()).expect("a short header");
        complex.extend_from_slice(&header_len.to_le_bytes());
        complex.extend_from_slice(header.as_bytes());
        complex.extend_from_slice(&[0; 8]);
        assert!(
            from_npy_bytes(&complex)
                .expect_err("complex")
                .contains("'<c8'")
        );
        let dir = TempDir::new("missing");
        let error = read_npy(&dir.0.join("absent.npy")).expect_err("absent file");
        assert_eq!(error.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn header_parser_accepts_numpy_variations() {
        let header =
            Header::parse("{\"shape\": (3L, 4), \"fortran_order\": False, \"descr\": \"<f8\"}")
                .expect("a valid header");
        assert_eq!(
            header,
            Header {
                descr: "<f8".into(),
                fortran_order: false,
                shape: vec![3, 4]
            }
        );
        assert!(
            Header::parse("{'descr': '<f8', 'shape': (1,)}")
                .expect_err("a header without fortran_order")
                .contains("fortran_order")
        );
    }
}
