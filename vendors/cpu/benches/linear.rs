//! `vsdk.linear` on DINOv2's MLP shape, [257 x 384] · [384 x 1536] + bias, f32.
//! Throughput is reported in FLOP/s (criterion's "elem/s" = 2·M·N·K per call).
//! tools/bench_linear.sh runs this next to PyTorch's F.linear on the same machine.
//!
//! Also measures ndarray's threaded `dot` (matrixmultiply), the alternative the
//! provider could have used, so the choice of `gemm` stays justified by numbers.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ndarray::{Array1, Array2, Axis};
use rand::{Rng, SeedableRng};

const M: usize = 257;
const K: usize = 384;
const N: usize = 1536;

fn bench(c: &mut Criterion) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(rand::random());
    let mut random =
        |r: usize, c: usize| Array2::from_shape_fn((r, c), |_| rng.gen_range(-1.0f32..1.0));
    let x = random(M, K);
    let w = random(N, K);
    let b: Array1<f32> = random(1, N).remove_axis(Axis(0));
    let mut out = Array2::<f32>::zeros((M, N));
    let mut group = c.benchmark_group("linear_257x384x1536_f32");
    group.throughput(Throughput::Elements((2 * M * N * K) as u64));
    group.bench_function("vsdk-provider-cpu (gemm)", |bench| {
        bench.iter(|| {
            vsdk_provider_cpu::kernels::linear(
                &x.view().into_dyn(),
                &w.view().into_dyn(),
                Some(&b.view().into_dyn()),
                out.view_mut().into_dyn(),
            )
        })
    });
    let wt = w.t();
    group.bench_function("ndarray dot (matrixmultiply-threading)", |bench| {
        bench.iter(|| {
            ndarray::linalg::general_mat_mul(1.0, &x, &wt, 0.0, &mut out);
            out += &b;
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
