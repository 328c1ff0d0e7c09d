//! homa-dump: prints the Homa packets of a pcap or pcapng capture, tcpdump
//! style, or as JSON, per RPC, or as statistics. See `homa-dump --help` and
//! docs/homa-dump.md; the code is in `homa_tools::dump`.

fn main() -> std::process::ExitCode {
    homa_tools::dump::main()
}
