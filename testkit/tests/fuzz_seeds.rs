//! The committed seed corpus of the packet_parser fuzz target is what
//! make-fuzz-corpus writes, and every seed parses through all its layers.

use std::path::Path;
use std::process::{Command, Stdio};

use homa_stack::wire::pretty::{dissect, Link, Network, Transport};

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz/corpus/packet_parser");

fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    out.sort();
    out
}

#[test]
fn committed_seeds_are_what_the_generator_writes() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-seeds");
    let _ = std::fs::remove_dir_all(&dir);
    let status = Command::new(env!("CARGO_BIN_EXE_make-fuzz-corpus"))
        .arg(&dir)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(files(&dir), files(Path::new(CORPUS)));
}

#[test]
fn every_seed_parses_through_every_layer() {
    let seeds = files(Path::new(CORPUS));
    assert!(seeds.len() >= 10, "only {} seeds", seeds.len());
    for (name, frame) in seeds {
        let d = dissect(&frame);
        assert!(matches!(d.link, Link::Ethernet(_)), "{name}: {d:?}");
        let complete = match d.network {
            Network::Arp(_) => matches!(d.transport, Transport::None),
            Network::Ipv4 { checksum_ok, .. } => {
                checksum_ok
                    && matches!(
                        d.transport,
                        Transport::Homa { .. }
                            | Transport::Icmpv4 {
                                checksum_ok: true,
                                ..
                            }
                    )
            }
            Network::Ipv6(_) => matches!(
                d.transport,
                Transport::Homa { .. }
                    | Transport::Icmpv6 {
                        checksum_ok: true,
                        ..
                    }
            ),
            _ => false,
        };
        assert!(complete, "{name} does not parse fully: {d:?}");
    }
}
