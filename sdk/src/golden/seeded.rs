//! Seeded tensors: a few bytes in the golden file that regenerate a tensor
//! bit-exactly, here or in any language (docs/golden-format.md is the spec).
//!
//! The generator is SplitMix64 used as a counter-based stream: draw `j` of a
//! tensor is `mix(seed + (j + 1) · γ)`, so elements are generated in parallel
//! and still equal the sequential definition.

use crate::{DType, HostTensor};
use half::{bf16, f16};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// The `j`-th output (0-based) of SplitMix64 started at `seed`.
pub fn splitmix64(seed: u64, j: u64) -> u64 {
    let mut z = seed.wrapping_add(j.wrapping_add(1).wrapping_mul(GAMMA));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// How the values of a seeded tensor are distributed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Distribution {
    /// `low + (high − low) · u`, `u` uniform in [0, 1): one draw per element.
    Uniform { low: f64, high: f64 },
    /// `mean + std · z`, `z` the Irwin–Hall sum of 12 uniforms minus 6
    /// (mean 0, variance 1, support [−6, 6]): twelve draws per element.
    Normal { mean: f64, std: f64 },
}

impl Distribution {
    fn draws(self) -> u64 {
        match self {
            Distribution::Uniform { .. } => 1,
            Distribution::Normal { .. } => 12,
        }
    }

    /// The f64 value of element `i`.
    fn value(self, seed: u64, i: u64) -> f64 {
        const TWO_53: f64 = 9_007_199_254_740_992.0;
        let first = i * self.draws();
        match self {
            Distribution::Uniform { low, high } => {
                let u = (splitmix64(seed, first) >> 11) as f64 / TWO_53;
                low + (high - low) * u
            }
            Distribution::Normal { mean, std } => {
                // Exact integer sum, one rounding when converted.
                let sum: i64 = (0..12)
                    .map(|j| (splitmix64(seed, first + j) >> 11) as i64)
                    .sum();
                let z = (sum - 6 * (1i64 << 53)) as f64 / TWO_53;
                mean + std * z
            }
        }
    }

    pub fn validate(self) -> Result<(), String> {
        let ok = match self {
            Distribution::Uniform { low, high } => {
                low.is_finite() && high.is_finite() && low <= high
            }
            Distribution::Normal { mean, std } => mean.is_finite() && std.is_finite() && std >= 0.0,
        };
        if ok {
            Ok(())
        } else {
            Err(format!("invalid distribution {self:?}"))
        }
    }
}

/// The recipe of a seeded tensor.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Seeded {
    pub seed: u64,
    pub distribution: Distribution,
}

impl Seeded {
    /// Generates the tensor. Only float dtypes can be seeded; the caller has
    /// bounded `numel`.
    pub fn generate(&self, dtype: DType, shape: &[usize]) -> Result<HostTensor, String> {
        self.distribution.validate()?;
        let n = shape.iter().product::<usize>();
        let (seed, dist) = (self.seed, self.distribution);
        let values = (0..n as u64)
            .into_par_iter()
            .map(move |i| dist.value(seed, i));
        let bytes: Vec<u8> = match dtype {
            DType::F64 => values.flat_map_iter(|v| v.to_le_bytes()).collect(),
            DType::F32 => values.flat_map_iter(|v| (v as f32).to_le_bytes()).collect(),
            DType::F16 => values
                .flat_map_iter(|v| f16::from_f64(v).to_le_bytes())
                .collect(),
            // Through float32, as `tensor.float().bfloat16()` rounds.
            DType::BF16 => values
                .flat_map_iter(|v| bf16::from_f32(v as f32).to_le_bytes())
                .collect(),
            d => return Err(format!("{d} tensors cannot be seeded (float dtypes only)")),
        };
        HostTensor::from_bytes(crate::TensorSpec::new(dtype, shape), bytes)
            .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_matches_its_published_sequence() {
        // Vigna's reference implementation seeded with 1234567.
        let expected = [
            6457827717110365317u64,
            3203168211198807973,
            9817491932198370423,
        ];
        for (j, &e) in expected.iter().enumerate() {
            assert_eq!(splitmix64(1234567, j as u64), e);
        }
    }

    #[test]
    fn documented_test_vectors_hold() {
        // docs/golden-format.md, "Test vectors".
        assert_eq!(
            [0, 1, 2].map(|j| splitmix64(42, j)),
            [
                13679457532755275413,
                2949826092126892291,
                5139283748462763858
            ]
        );
        let uniform = Seeded {
            seed: 42,
            distribution: Distribution::Uniform {
                low: -1.0,
                high: 1.0,
            },
        };
        let t = uniform.generate(DType::F32, &[2, 2]).unwrap();
        assert_eq!(hex::encode(&t.bytes), "c95cf73e3a202ebf63b6e2be788c9fbe");
        let normal = Seeded {
            seed: 42,
            distribution: Distribution::Normal {
                mean: 0.0,
                std: 1.0,
            },
        };
        let t = normal.generate(DType::BF16, &[4]).unwrap();
        assert_eq!(hex::encode(&t.bytes), "65bfefbecc3fefbf");
        let t = normal.generate(DType::F64, &[4]).unwrap();
        assert_eq!(
            t.to_f64_vec(),
            [
                -0.8941334431933908,
                -0.4665347967936786,
                1.5925395539097527,
                -1.863923882089576
            ]
        );
    }

    #[test]
    fn normal_has_unit_moments() {
        let t = Seeded {
            seed: rand_seed(),
            distribution: Distribution::Normal {
                mean: 0.0,
                std: 1.0,
            },
        }
        .generate(DType::F64, &[100_000])
        .unwrap();
        let v = t.to_f64_vec();
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64;
        assert!(
            mean.abs() < 0.02 && (var - 1.0).abs() < 0.03,
            "mean {mean} var {var}"
        );
    }

    fn rand_seed() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(7, |d| d.as_nanos() as u64)
    }
}
