//! Elements judged per second by the device's streaming verdict
//! (docs/benchmarks.md, "Embedded verifier"): float32 and bfloat16 outputs
//! fed in 1024-element chunks, as a pack's Expected frames bring them.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::{Rng, SeedableRng};
use vips_verify_core::{DType, Judge, Nan, Rules};

const N: usize = 1 << 20;
const CHUNK: usize = 1024;

fn bench(c: &mut Criterion) {
    let mut g = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let reference: Vec<f64> = (0..N).map(|_| g.gen_range(-4.0..4.0)).collect();
    let expected: Vec<u8> = reference
        .iter()
        .flat_map(|&r| [r, 1e-5 + r.abs() * 1e-6, 3e-6])
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let rules = Rules {
        nan: Nan::Fail,
        allowed_over: 0,
        rms_factor: 1.5,
        bias: Some((4.0, 0.1)),
    };
    let mut group = c.benchmark_group("judge");
    group.throughput(Throughput::Elements(N as u64));
    for dtype in [DType::F32, DType::BF16] {
        let actual: Vec<u8> = reference
            .iter()
            .flat_map(|&r| match dtype {
                DType::F32 => (r as f32).to_le_bytes().to_vec(),
                _ => half::bf16::from_f64(r).to_le_bytes().to_vec(),
            })
            .collect();
        let size = dtype.size();
        group.bench_with_input(
            BenchmarkId::from_parameter(format!("{dtype:?}")),
            &actual,
            |b, actual| {
                b.iter(|| {
                    let mut j = Judge::new(dtype, N as u64, rules).unwrap();
                    for (a, e) in actual.chunks(CHUNK * size).zip(expected.chunks(CHUNK * 24)) {
                        j.bytes(a, e).unwrap();
                    }
                    j.finish().unwrap()
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
