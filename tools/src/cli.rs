//! Value checks shared by the programs' command lines (clap does the
//! parsing): each states the accepted range in its error, so a bad option is
//! refused before any work or allocation, with a message that says what
//! would have been accepted.

/// The largest offered load the programs accept (`homa-sim --load`,
/// `homa-perf client --load`, `homa-perf testbed --load`): up to 1.5 times
/// the link, so overload can be studied; beyond that a run only measures a
/// queue that grows for as long as it lasts.
pub const MAX_LOAD: f64 = 1.5;

/// Homa's largest message, in bytes (`protocol.md` section 3).
pub const MAX_MESSAGE: u32 = 1_000_000;

/// Writes `text` to standard output and flushes it. A closed pipe (as with
/// `| head`) is not an error: the reader has what it wanted. Any other
/// failure is, as `standard output: ERROR`, for the program to report with
/// exit status 1 (as homa-dump does).
pub fn write_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::anyhow!("standard output: {e}"))
        }
        _ => Ok(()),
    }
}

/// [`write_stdout`] with `format!` arguments and a newline.
#[macro_export]
macro_rules! outln {
    () => {
        $crate::cli::write_stdout("\n")
    };
    ($($arg:tt)*) => {
        $crate::cli::write_stdout(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// Lets an option's value start with a minus sign (for clap's `mut_args`),
/// so that `--duration -1` is refused by the option's range with a message
/// that names it, not taken for an unknown option `-1`.
pub fn negative_values(a: clap::Arg) -> clap::Arg {
    let takes_value = a.get_action().takes_values();
    a.allow_negative_numbers(takes_value)
}

fn number(s: &str) -> anyhow::Result<f64> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| anyhow::anyhow!("{s:?} is not a number"))?;
    if !v.is_finite() {
        return Err(anyhow::anyhow!("{s:?} is not a finite number"));
    }
    Ok(v)
}

/// An offered load: a fraction of the link in `(0, MAX_LOAD]`.
pub fn load(s: &str) -> anyhow::Result<f64> {
    let v = number(s)?;
    if v > 0.0 && v <= MAX_LOAD {
        Ok(v)
    } else {
        Err(anyhow::anyhow!(
            "{v} is not in (0, {MAX_LOAD}]: the load is a fraction of the link rate"
        ))
    }
}

/// A probability or share in `[0, 1]`.
pub fn fraction(s: &str) -> anyhow::Result<f64> {
    let v = number(s)?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(anyhow::anyhow!("{v} is not a fraction in [0, 1]"))
    }
}

/// A share in `[0, 1)`.
pub fn fraction_below_one(s: &str) -> anyhow::Result<f64> {
    let v = number(s)?;
    if (0.0..1.0).contains(&v) {
        Ok(v)
    } else {
        Err(anyhow::anyhow!("{v} is not a fraction in [0, 1)"))
    }
}

/// Milliseconds in `(0, 10_000_000)` (under three hours).
pub fn millis(s: &str) -> anyhow::Result<f64> {
    let v = number(s)?;
    if v > 0.0 && v < 1e7 {
        Ok(v)
    } else {
        Err(anyhow::anyhow!("{v} is not in (0, 10000000) milliseconds"))
    }
}

/// Seconds in `[0, 86_400]` (a day).
pub fn seconds(s: &str) -> anyhow::Result<f64> {
    let v = number(s)?;
    if (0.0..=86_400.0).contains(&v) {
        Ok(v)
    } else {
        Err(anyhow::anyhow!("{v} is not in [0, 86400] seconds"))
    }
}

/// A positive, finite rate (e.g. RPCs per second) up to ten million.
pub fn rate(s: &str) -> anyhow::Result<f64> {
    let v = number(s)?;
    if v > 0.0 && v <= 1e7 {
        Ok(v)
    } else {
        Err(anyhow::anyhow!("{v} is not in (0, 10000000]"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_enforced_and_named_in_the_error() {
        assert_eq!(load("0.8").unwrap(), 0.8);
        assert_eq!(load("1.5").unwrap(), 1.5);
        for bad in ["0", "2.5", "-1", "nan", "inf", "x"] {
            assert!(load(bad).is_err(), "{bad}");
        }
        assert!(load("2.5").unwrap_err().to_string().contains("(0, 1.5]"));
        assert!(fraction("1.01").unwrap_err().to_string().contains("[0, 1]"));
        assert_eq!(fraction("1").unwrap(), 1.0);
        assert!(fraction_below_one("1").is_err());
        assert!(millis("0").is_err());
        assert!(seconds("86401").is_err());
        assert!(rate("0").is_err());
    }
}
