//! The committed capture homa-dump's tests read (`tools/data/loss.pcap`)
//! is what this crate's `loopback` writes: regenerate it with the command
//! in `testkit/src/bin/make-dump-captures.rs` when the engine's output changes.

use std::path::Path;
use std::process::{Command, Stdio};

#[test]
fn the_loss_capture_is_what_the_loopback_program_writes() {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("loss.pcap");
    let status = Command::new(env!("CARGO_BIN_EXE_loopback"))
        .args(["--pcap", path.to_str().unwrap()])
        .args(["--rpcs", "6", "--max-size", "6000", "--loss", "0.08"])
        .args(["--seed", "2", "--concurrency", "2"])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    assert!(
        std::fs::read(&path).unwrap()
            == std::fs::read(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../tools/data/loss.pcap"
            ))
            .unwrap(),
        "tools/data/loss.pcap is stale: regenerate it with the command in testkit/src/bin/make-dump-captures.rs"
    );
}
