//! The examples' command lines: `--help` is not an error (exit 0, the help
//! on standard output), a missing argument is (exit 2), and a negative
//! value is refused by its range, not taken for an unknown option.

use std::process::{Command, Output};

fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program).args(args).output().unwrap()
}

#[test]
fn the_echo_programs_print_their_help_and_exit_0() {
    for program in [
        env!("CARGO_BIN_EXE_echo-server"),
        env!("CARGO_BIN_EXE_echo-client"),
    ] {
        for help in ["--help", "-h"] {
            let out = run(program, &[help]);
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert_eq!(out.status.code(), Some(0), "{program} {help}: {out:?}");
            assert!(stdout.contains("usage: echo-"), "{program}: {stdout}");
            assert!(out.stderr.is_empty(), "{program}: {out:?}");
        }
        let out = run(program, &[]);
        assert_eq!(out.status.code(), Some(2), "{program}: {out:?}");
        assert!(String::from_utf8_lossy(&out.stderr).starts_with("usage: echo-"));
    }
}

#[test]
fn a_negative_share_gets_the_range_message() {
    let out = run(env!("CARGO_BIN_EXE_loopback"), &["--loss", "-0.1"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("-0.1 is not a fraction in [0, 1]"), "{err}");
}
