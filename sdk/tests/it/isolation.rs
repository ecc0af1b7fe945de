//! The worker protocol and the baseline reader on their own: round trips of
//! random tensors, and malformed input refused before it costs memory.

use rand::{Rng, SeedableRng};
use vips_sdk::execution::{Layout, Program, Spec, Step};
use vips_sdk::isolation::protocol::{self, ProtocolError, Reply, Request};
use vips_sdk::runner::Baseline;
use vips_sdk::{Attrs, HostTensor};

fn rng() -> rand_chacha::ChaCha8Rng {
    let seed = rand::random::<u64>();
    eprintln!("seed {seed}");
    rand_chacha::ChaCha8Rng::seed_from_u64(seed)
}

#[test]
fn a_run_request_round_trips_with_its_tensors() {
    let mut rng = rng();
    let shape = [rng.gen_range(1..9), rng.gen_range(1..300)];
    let values: Vec<f32> = (0..shape[0] * shape[1])
        .map(|_| rng.gen_range(-3.0..3.0))
        .collect();
    let x = HostTensor::from_vec(&shape, values).unwrap();
    let program = Program {
        steps: vec![Step {
            inputs: vec!["x".into()],
            outputs: vec!["y".into()],
            ..Step::new(
                "vsdk.gelu",
                1,
                &Attrs::new().with("eps", vips_sdk::AttrValue::Float(rng.gen())),
            )
        }],
        layouts: vec![(
            "x".into(),
            Layout {
                strides: vec![rng.gen_range(0..9), 1],
                offset: rng.gen_range(0..9),
            },
        )],
        threads: rng.gen_range(0..4),
    };
    let request = Request::Run {
        program: program.clone(),
        inputs: vec![("x".into(), Spec::of(&x.spec))],
        seed: rng.gen(),
    };
    let mut wire = Vec::new();
    protocol::write(&mut wire, &request, &[&x.bytes]).unwrap();
    let back = protocol::read::<Request>(&mut wire.as_slice()).unwrap();
    assert_eq!(back.header, request);
    assert_eq!(back.tensors.len(), 1);
    assert_eq!(back.tensors[0].bytes, x.bytes);
    assert_eq!(back.tensors[0].spec, x.spec);
}

#[test]
fn an_empty_channel_is_closed_and_a_cut_message_is_malformed() {
    assert!(matches!(
        protocol::read::<Reply>(&mut [].as_slice()),
        Err(ProtocolError::Closed)
    ));
    let mut wire = Vec::new();
    protocol::write(&mut wire, &Reply::Supported(vec![true, false]), &[]).unwrap();
    let cut = &wire[..wire.len() - 1];
    assert!(matches!(
        protocol::read::<Reply>(&mut &cut[..]),
        Err(ProtocolError::Malformed(_))
    ));
}

#[test]
fn lengths_are_bounded_before_anything_is_allocated() {
    // A header length past the limit.
    let mut wire = (protocol::MAX_HEADER_BYTES + 1).to_le_bytes().to_vec();
    wire.extend([0u8; 16]);
    let e = protocol::read::<Request>(&mut wire.as_slice()).unwrap_err();
    assert!(e.to_string().contains("header of"), "{e}");
    // A tensor announced at 8 GiB with 10 bytes behind it: refused after
    // reading what is there, not after reserving 8 GiB.
    let huge = Reply::Ran {
        outputs: vec![(
            "y".into(),
            Spec {
                dtype: "float32".into(),
                shape: vec![1 << 31],
            },
        )],
        repeated: vec![false],
        findings: Vec::new(),
        kernel_seconds: 0.0,
    };
    let mut wire = Vec::new();
    protocol::write(&mut wire, &huge, &[&[7u8; 10]]).unwrap();
    let e = protocol::read::<Reply>(&mut wire.as_slice()).unwrap_err();
    assert!(
        e.to_string().contains("ends after 10 of 8589934592 bytes"),
        "{e}"
    );
    // A shape whose size overflows, and one past the tensor limit.
    for shape in [vec![u64::MAX, 3], vec![1 << 40]] {
        let r = Reply::Ran {
            outputs: vec![(
                "y".into(),
                Spec {
                    dtype: "float32".into(),
                    shape,
                },
            )],
            repeated: vec![false],
            findings: Vec::new(),
            kernel_seconds: 0.0,
        };
        let mut wire = Vec::new();
        protocol::write(&mut wire, &r, &[]).unwrap();
        let e = protocol::read::<Reply>(&mut wire.as_slice()).unwrap_err();
        assert!(e.to_string().contains("tensor limit"), "{e}");
    }
}

#[test]
fn a_baseline_is_a_results_csv() {
    let text = "tier,mode,round,stage,status,execution,max_e,seconds,reason\n\
                fp32,isolated,main,block_00,CRASHED,decomposed,,0.1,\"killed, by SIGSEGV\"\n\
                fp32,isolated,main,block_01,PASS,decomposed,0.1,0.1,\n\
                fp32,isolated,differential,block_02,FAIL,decomposed,2.0,0.1,\n\
                fp32,isolated,contract,block_00,FAIL,,2.0,0.1,\n";
    let b = Baseline::parse(text).unwrap();
    assert_eq!(
        b.len(),
        2,
        "main-round and contract failures are expected, each under its own name"
    );
    // A pass the baseline did not expect, a flake, a stage never run: not
    // failures the provider is excused for.
    let b = Baseline::parse(
        "tier,round,stage,status\nfp32,main,a,UNEXPECTED PASS\nfp32,main,b,FLAKY\nfp32,main,c,MISSING\nfp32,main,d,EXPECTED FAIL\nfp32,main,e,OUT OF BOUNDS\n",
    )
    .unwrap();
    assert_eq!(b.len(), 2, "d and e");
    let e = Baseline::parse("stage,status\nx,PASS\n").unwrap_err();
    assert!(e.contains("no `tier` column"), "{e}");
    let e = Baseline::parse("tier,round,stage,status\nfp32,main,x,PASS\nfp32,main,y,SOMETIMES\n")
        .unwrap_err();
    assert!(e.contains("line 3: unknown status \"SOMETIMES\""), "{e}");
}
