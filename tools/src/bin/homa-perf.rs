//! homa-perf: measure homa-stack over a TAP device or an AF_PACKET socket,
//! and the kernel's TCP the same way; `testbed` compares them under load in
//! network namespaces it builds and removes. `homa-perf --help` for usage;
//! with no arguments it prints the usage and exits 2.

use std::process::ExitCode;

use homa_tools::cli::write_stdout;
use homa_tools::outln;
use homa_tools::perf::cli::{self, Command, Transport};
use homa_tools::perf::{homa, sys, tcp, testbed};

fn main() -> ExitCode {
    let cmd = match cli::parse(std::env::args_os().skip(1)) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    match run(cmd) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("homa-perf: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cmd: Command) -> anyhow::Result<ExitCode> {
    match cmd {
        Command::Cleanup => {
            let n = testbed::cleanup_leftovers();
            outln!("removed {n} leftover testbed namespaces")?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Testbed(o) => Ok(status(testbed::run_testbed(&o)?)),
        Command::Server(o) => {
            sys::catch_stop_signals();
            let r = match o.transport {
                Transport::Tcp => tcp::run_server(&o)?,
                _ => homa::run_server(&o)?,
            };
            write_stdout(&if o.json { json(r.to_json()) } else { r.text() })?;
            Ok(status(r.corrupt == 0 && r.failed == 0))
        }
        Command::Client(o) => {
            sys::catch_stop_signals();
            if let Some(note) = o.size_note() {
                eprintln!("homa-perf: {note}");
            }
            let r = match o.transport {
                Transport::Tcp => tcp::run_client(&o)?,
                _ => homa::run_client(&o)?,
            };
            write_stdout(&if o.json { json(r.to_json()) } else { r.text() })?;
            Ok(status(
                r.failed == 0 && r.corrupt == 0 && r.unfinished == 0 && r.completed > 0,
            ))
        }
    }
}

/// A report's JSON line.
fn json(v: serde_json::Value) -> String {
    format!("{v}\n")
}

/// Exit status 0 for a clean run, 1 for one where RPCs went wrong.
fn status(clean: bool) -> ExitCode {
    if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
