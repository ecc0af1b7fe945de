//! Every hostile library is built and is a provider library. The ones that
//! kill or hang the process (segfault, abort, exit0, hang, throw_create,
//! destroy_crash) or attack the host unconfined (mem_writer, fork_detach,
//! allocator) are only loaded here, never run: the runner's own tests run
//! them in a (sandboxed) worker process.

use crate::common;

use std::collections::HashSet;
use vsdk_hostile_providers as hostile;

#[test]
fn every_variant_is_built_and_exports_the_entry_point() {
    let names: HashSet<&str> = hostile::ALL.iter().map(|(name, _)| *name).collect();
    assert_eq!(names.len(), hostile::ALL.len(), "a name listed twice");
    assert_eq!(hostile::ALL.len(), 26);
    for (name, path) in hostile::ALL {
        let file = std::path::Path::new(path);
        assert!(file.is_file(), "{name}: {path} was not built");
        assert_eq!(
            file.file_name().unwrap().to_str().unwrap(),
            format!("libvsdk_hostile_{name}.so")
        );
        drop(common::load(path));
    }
}
