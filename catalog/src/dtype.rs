use std::fmt;

/// The element types of catalog v1 (DLPack code/bits, lanes = 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    F16,
    BF16,
    F32,
    F64,
    U8,
    I32,
    I64,
}

impl DType {
    pub const ALL: [DType; 7] = [
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
        DType::U8,
        DType::I32,
        DType::I64,
    ];

    /// DLPack (code, bits).
    pub fn dlpack(self) -> (u8, u8) {
        match self {
            DType::F16 => (2, 16),
            DType::BF16 => (4, 16),
            DType::F32 => (2, 32),
            DType::F64 => (2, 64),
            DType::U8 => (1, 8),
            DType::I32 => (0, 32),
            DType::I64 => (0, 64),
        }
    }

    /// The dtype of DLPack (code, bits, lanes), if catalog v1 has it.
    pub fn from_dlpack(code: u8, bits: u8, lanes: u16) -> Option<DType> {
        if lanes != 1 {
            return None;
        }
        DType::ALL.into_iter().find(|d| d.dlpack() == (code, bits))
    }

    pub fn size_bytes(self) -> usize {
        usize::from(self.dlpack().1 / 8)
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// The catalog's name, as used by `vsdk.cast`'s `dtype` attribute.
    pub fn name(self) -> &'static str {
        match self {
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::U8 => "uint8",
            DType::I32 => "int32",
            DType::I64 => "int64",
        }
    }

    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
