//! The tools' exit statuses and messages when they cannot do what was
//! asked: a failed write is reported with exit status 1 (as homa-dump does),
//! a usage error exits 2, and a run the memory cannot hold is refused up
//! front with its estimate instead of aborting in an allocation.

use std::fs::File;
use std::process::{Command, Output};

const SIM: &str = env!("CARGO_BIN_EXE_homa-sim");
const BENCH: &str = env!("CARGO_BIN_EXE_homa-bench");
const PERF: &str = env!("CARGO_BIN_EXE_homa-perf");

fn text(out: &Output) -> String {
    format!(
        "status {:?}, stdout {:?}, stderr {:?}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `program args > /dev/full`.
fn to_full(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .stdout(File::create("/dev/full").unwrap())
        .output()
        .unwrap()
}

fn assert_write_failure(program: &str, args: &[&str], name: &str) {
    let out = to_full(program, args);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{name}: standard output: No space left on device"))
            && !err.contains("panicked"),
        "{args:?}: {}",
        text(&out)
    );
}

#[test]
fn homa_sim_reports_a_failed_write() {
    let run = ["--duration", "0.05", "--quiet", "--protocols", "homa"];
    assert_write_failure(SIM, &[&run[..], &["--json"]].concat(), "homa-sim");
    assert_write_failure(SIM, &run, "homa-sim");
    let out = Command::new(SIM)
        .args(run)
        .args(["--json-out", "/dev/full"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("/dev/full: No space left on device"),
        "{}",
        text(&out)
    );
}

#[test]
fn homa_sim_refuses_a_duration_beyond_memory_with_its_estimate() {
    // In range (under three hours of arrivals), but billions of messages.
    let out = Command::new(SIM)
        .args(["--duration", "9999999", "--quiet"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("homa-sim: 9999999 ms of arrivals (about ")
            && err.contains(" messages) needs about ")
            && err.contains(" of memory, and "),
        "{}",
        text(&out)
    );
}

#[test]
fn homa_bench_reports_a_failed_write() {
    assert_write_failure(
        BENCH,
        &["--only", "udp-echo", "--count", "10"],
        "homa-bench",
    );
}

#[test]
fn homa_bench_quick_prints_its_rows_from_a_short_run() {
    let out = Command::new(BENCH).arg("--quick").output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    // The header, ten rows with a figure each, and the ratios.
    assert_eq!(lines.len(), 12, "{}", text(&out));
    assert!(lines[0].starts_with("measure "), "{}", text(&out));
    for row in &lines[1..11] {
        assert!(
            row.split_whitespace()
                .any(|w| w.parse::<f64>().is_ok_and(|v| v > 0.0)),
            "no figure in {row:?}"
        );
    }
    assert!(
        lines[11].starts_with("ratios: rpc_vs_udp="),
        "{}",
        text(&out)
    );
}

#[test]
fn help_opens_with_what_the_tool_is_for() {
    let out = Command::new(BENCH).arg("--help").output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.starts_with("homa-stack against smoltcp 0.13, in one process and one run"),
        "{help}"
    );
}

/// `--duration -1` is a value out of range, not an unknown option `-1`.
#[test]
fn a_negative_value_gets_the_range_message() {
    for (program, args, want) in [
        (
            SIM,
            &["--duration", "-1"][..],
            "-1 is not in (0, 10000000) milliseconds",
        ),
        (
            PERF,
            &["server", "--tcp", "--duration", "-1"][..],
            "-1 is not in [0, 86400] seconds",
        ),
        (
            PERF,
            &[
                "client",
                "--tcp",
                "--server",
                "127.0.0.1:5000",
                "--size",
                "1",
                "--rate",
                "1",
                "--duration",
                "-1",
            ][..],
            "-1 is not in [0, 86400] seconds",
        ),
        (
            PERF,
            &["testbed", "--load", "-0.5"][..],
            "-0.5 is not in (0, 1.5]",
        ),
        (BENCH, &["--reps", "-1"][..], "-1 is not in 1..=1000"),
    ] {
        let out = Command::new(program).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {}", text(&out));
    }
}

#[test]
fn homa_bench_unknown_measurement_is_a_usage_error() {
    let out = Command::new(BENCH)
        .args(["--only", "nosuch"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unknown measurement \"nosuch\""),
        "{}",
        text(&out)
    );
}

/// `cleanup` lists network namespaces (none of ours): it needs `ip`, which
/// CI's run of the ignored tests has.
#[test]
#[ignore = "needs the ip command"]
fn homa_perf_reports_a_failed_write() {
    assert!(
        Command::new("ip").arg("-V").output().is_ok(),
        "this test needs the ip command"
    );
    assert_write_failure(PERF, &["cleanup"], "homa-perf");
}

#[test]
fn homa_sim_refuses_a_chart_format_it_cannot_write() {
    let dir = env!("CARGO_TARGET_TMPDIR");
    let jpg = format!("{dir}/chart.jpg");
    let png = format!("{dir}/chart.png");
    let mut cases = vec![(
        jpg,
        "unknown chart format; --plot writes FILE.svg or FILE.png",
    )];
    if !cfg!(feature = "png") {
        cases.push((png, "PNG needs the png feature"));
    }
    for (path, want) in cases {
        let _ = std::fs::remove_file(&path);
        let out = Command::new(SIM)
            .args(["--duration", "0.05", "--quiet", "--plot", &path])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{path}: {}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(want),
            "{path}: {}",
            text(&out)
        );
        assert!(!std::path::Path::new(&path).exists(), "{path} was written");
    }
}
