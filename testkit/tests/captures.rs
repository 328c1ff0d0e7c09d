//! The committed captures (tools/data/) and fuzz seeds (fuzz/corpus/) are
//! what their generators write today: a change of the engine's output or
//! of a generator that is not committed with its regenerated files fails
//! here. (The generators are bins of this crate: they are test fixtures,
//! not tools.)

use std::path::Path;
use std::process::{Command, Stdio};

fn data(name: &str) -> String {
    format!("{}/../tools/data/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Runs generator `exe` with the output `arg`.
fn generate(exe: &str, arg: &Path) {
    let status = Command::new(exe)
        .arg(arg)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "{exe} {}", arg.display());
}

#[test]
fn the_sample_capture_is_what_its_generator_writes() {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("regenerated.pcap");
    generate(env!("CARGO_BIN_EXE_make-sample-capture"), &path);
    assert!(
        std::fs::read(&path).unwrap() == std::fs::read(data("sample.pcap")).unwrap(),
        "sample.pcap is stale: run make-sample-capture"
    );
}

#[test]
fn the_dump_captures_are_what_their_generator_writes() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dump-captures");
    std::fs::create_dir_all(&dir).unwrap();
    generate(env!("CARGO_BIN_EXE_make-dump-captures"), &dir);
    for name in [
        "every-type.pcapng",
        "snaplen.pcap",
        "snaplen-96.pcap",
        "link-sll.pcap",
        "link-sll2.pcap",
        "link-raw.pcap",
        "link-ipv4.pcap",
        "link-ipv6.pcap",
    ] {
        assert!(
            std::fs::read(dir.join(name)).unwrap() == std::fs::read(data(name)).unwrap(),
            "{name} is stale: run make-dump-captures"
        );
    }
}
