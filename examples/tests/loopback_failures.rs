//! `loopback` reports what it cannot do: a failed write (standard output or
//! the capture file) ends with a message and exit status 1, never a panic or
//! a silent success; a run the memory cannot hold is refused up front with
//! its estimate (exit status 2) instead of aborting in an allocation.

use std::fs::File;
use std::process::{Command, Output, Stdio};

const LOOPBACK: &str = env!("CARGO_BIN_EXE_loopback");

fn text(out: &Output) -> String {
    format!(
        "status {:?}, stderr {:?}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn a_capture_that_cannot_be_written_is_an_error() {
    let out = Command::new(LOOPBACK)
        .args(["--pcap", "/dev/full"])
        .stdout(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("loopback: /dev/full: No space left on device"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_full_standard_output_is_an_error_not_a_panic() {
    for args in [&[][..], &["--rpcs", "3"][..]] {
        let out = Command::new(LOOPBACK)
            .args(args)
            .stdout(File::create("/dev/full").unwrap())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("loopback: standard output: No space left on device")
                && !err.contains("panicked"),
            "{args:?}: {}",
            text(&out)
        );
    }
}

#[test]
fn a_run_beyond_the_memory_limit_is_refused_with_its_estimate() {
    // 1024 RPCs at a time: two pools of (2 x 1024 + 2) x 1.1 MB, 4.5 GB,
    // under an address-space limit of 1 GB.
    let out = Command::new("sh")
        .args([
            "-c",
            "ulimit -v 1000000 && exec \"$0\" --rpcs 10 --concurrency 1024",
        ])
        .arg(LOOPBACK)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("a run of 1024 RPCs at a time needs about 4.5 GB of memory, and"),
        "{}",
        text(&out)
    );
}
