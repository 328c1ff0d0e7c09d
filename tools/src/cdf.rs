//! The one reader of workload files, for homa-sim and homa-perf alike: a
//! `bytes,cdf` CSV, one row per message size.
//!
//! Rules: blank lines are skipped; the first other line may be the header
//! `bytes,cdf` (spaces ignored), and a file without it is read the same way,
//! but a first line that is neither that header nor a row is an error (so a
//! file with other columns is not misread); each row is a size in bytes
//! (an integer > 0) and the fraction of messages of at most that size;
//! sizes strictly increase, the fraction never decreases, stays in [0, 1]
//! and the last row's is 1 (within 1e-6, then set to exactly 1).

use std::fmt;

/// Why a workload file was refused; `Display` says where and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CdfError {
    /// The file's name as given.
    pub name: String,
    /// 1-based line number, when one line is at fault.
    pub line: Option<usize>,
    /// What is wrong.
    pub what: String,
}

impl fmt::Display for CdfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "workload {} line {l}: {}", self.name, self.what),
            None => write!(f, "workload {}: {}", self.name, self.what),
        }
    }
}

impl std::error::Error for CdfError {}

impl From<CdfError> for String {
    fn from(e: CdfError) -> String {
        e.to_string()
    }
}

/// Reads a `bytes,cdf` table by the rules above: (size, cdf) rows.
pub fn parse(name: &str, text: &str) -> Result<Vec<(u64, f64)>, CdfError> {
    let err = |line: Option<usize>, what: String| CdfError {
        name: name.to_string(),
        line,
        what,
    };
    let mut rows: Vec<(u64, f64)> = Vec::new();
    let mut first = true;
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        let at = Some(n + 1);
        if std::mem::take(&mut first) && line.starts_with(|c: char| !c.is_ascii_digit()) {
            if line.replace(' ', "") == "bytes,cdf" {
                continue;
            }
            return Err(err(
                at,
                format!("the header must be `bytes,cdf` (or none), not `{line}`"),
            ));
        }
        let (b, c) = line
            .split_once(',')
            .ok_or_else(|| err(at, format!("expected `bytes,cdf`, got `{line}`")))?;
        let b: u64 = b
            .trim()
            .parse()
            .map_err(|_| err(at, format!("size `{}` is not a whole number", b.trim())))?;
        let c: f64 = c
            .trim()
            .parse()
            .map_err(|_| err(at, format!("cdf `{}` is not a number", c.trim())))?;
        if b == 0 {
            return Err(err(at, "sizes must be > 0".into()));
        }
        if !(0.0..=1.0 + 1e-9).contains(&c) {
            return Err(err(at, format!("cdf {c} is not in [0, 1]")));
        }
        if let Some(&(lb, lc)) = rows.last() {
            if b <= lb {
                return Err(err(at, format!("size {b} does not increase (after {lb})")));
            }
            if c < lc {
                return Err(err(at, format!("cdf {c} decreases (after {lc})")));
            }
        }
        rows.push((b, c));
    }
    match rows.last_mut() {
        None => Err(err(None, "no rows".into())),
        Some((_, c)) if (*c - 1.0).abs() >= 1e-6 => Err(err(
            None,
            format!("the last row's cdf is {c}, it must be 1"),
        )),
        Some((_, c)) => {
            *c = 1.0;
            Ok(rows)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_and_without_the_header_the_rows_are_the_same() {
        let a = parse("t", "bytes,cdf\n10,0.5\n20,1\n").unwrap();
        let b = parse("t", "\n10,0.5\n 20 , 1.0 \n\n").unwrap();
        assert_eq!(a, [(10, 0.5), (20, 1.0)]);
        assert_eq!(a, b);
        assert_eq!(parse("t", "bytes, cdf\n5,1").unwrap(), [(5, 1.0)]);
    }

    #[test]
    fn bad_files_are_refused_with_a_readable_reason() {
        for (text, says) in [
            ("size,p\n1,1\n", "line 1: the header must be `bytes,cdf`"),
            ("10,0.5\n5,1\n", "line 2: size 5 does not increase"),
            ("10,0.5\n20,0.4\n30,1\n", "line 2: cdf 0.4 decreases"),
            ("10,0.5\n20,0.9\n", "the last row's cdf is 0.9"),
            ("", "no rows"),
            ("bytes,cdf\n", "no rows"),
            ("10;1\n", "line 1: expected `bytes,cdf`"),
            ("0,1\n", "sizes must be > 0"),
            ("10,1.5\n", "cdf 1.5 is not in [0, 1]"),
            ("ten,1\n", "the header must be"),
            ("10,x\n", "cdf `x` is not a number"),
        ] {
            let e = parse("f.csv", text).unwrap_err().to_string();
            assert!(e.starts_with("workload f.csv"), "{e}");
            assert!(e.contains(says), "{text:?}: {e}");
            assert!(!e.contains("Some("), "{e}");
        }
    }
}
