//! The worker program: the CLI and the C library run each provider in it,
//! sandboxed (sdk/execution/src/sandbox). Not meant to be started by hand.

fn main() {
    std::process::exit(vips_sdk::isolation::worker_main());
}
