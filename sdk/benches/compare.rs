//! Comparison throughput on 64 Mi float32 elements (256 MiB per tensor).
//! tools/bench_compare.sh runs this next to NumPy's `allclose` + `hashlib.sha256`.
//!
//! - `read bandwidth`: a parallel sum over both tensors, the machine's
//!   practical read bandwidth for this access pattern (the comparison's ceiling);
//! - `compare`: `compare::compare`, all metrics;
//! - `compare + sha256`: `compare::compare_and_hash`.
//!
//! Throughput is in bytes read (both tensors).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use std::time::Duration;
use vips_sdk::compare::*;
use vips_sdk::HostTensor;

const N: usize = 64 << 20;

fn bench(c: &mut Criterion) {
    let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(rand::random());
    let e: Vec<f32> = (0..N).map(|_| r.gen_range(-4.0f32..4.0)).collect();
    let a: Vec<f32> = e.iter().map(|&v| v * (1.0 + 1e-7)).collect();
    let (a, e) = (
        HostTensor::from_vec(&[N], a).unwrap(),
        HostTensor::from_vec(&[N], e).unwrap(),
    );
    let criteria = Criteria {
        tolerance: Tolerance::Close {
            rtol: 1e-5,
            atol: 1e-6,
        },
        nan: NanPolicy::Fail,
        allowed_mismatch_fraction: 0.0,
    };
    let mut g = c.benchmark_group("64Mi_f32");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(8))
        .warm_up_time(Duration::from_secs(2));
    g.throughput(Throughput::Bytes(2 * 4 * N as u64));
    g.bench_function("read bandwidth (parallel sum)", |b| {
        b.iter(|| {
            let sum = |v: &[u8]| {
                v.par_chunks(1 << 20)
                    .map(|c| {
                        c.chunks_exact(8)
                            .map(|x| u64::from_le_bytes(x.try_into().unwrap()))
                            .fold(0u64, u64::wrapping_add)
                    })
                    .reduce(|| 0, u64::wrapping_add)
            };
            sum(&a.bytes).wrapping_add(sum(&e.bytes))
        })
    });
    g.bench_function("compare", |b| {
        b.iter(|| compare(&a, &e, &criteria).unwrap())
    });
    g.bench_function("compare + sha256", |b| {
        b.iter(|| compare_and_hash(&a, &e, &criteria).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
