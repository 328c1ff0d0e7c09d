//! A minimal command-line parser: `--name value` and `--flag`, with clear
//! errors, so the examples need no argument-parsing dependency.

use std::collections::HashMap;
use std::fmt::Display;
use std::str::FromStr;

/// Parsed options.
pub struct Args {
    values: HashMap<String, String>,
    flags: Vec<String>,
    /// Words that are not options, in order.
    pub positional: Vec<String>,
}

impl Args {
    /// Parses `std::env::args()`; `flags` lists the options that take no value.
    pub fn parse(flags: &[&str]) -> Result<Args, String> {
        Self::parse_from(std::env::args().skip(1), flags)
    }

    /// Parses the given words.
    pub fn parse_from(
        words: impl IntoIterator<Item = String>,
        flags: &[&str],
    ) -> Result<Args, String> {
        let mut values = HashMap::new();
        let mut set = Vec::new();
        let mut positional = Vec::new();
        let mut it = words.into_iter();
        while let Some(w) = it.next() {
            if let Some(name) = w.strip_prefix("--") {
                if let Some((n, v)) = name.split_once('=') {
                    values.insert(n.to_string(), v.to_string());
                } else if flags.contains(&name) {
                    set.push(name.to_string());
                } else {
                    let v = it.next().ok_or_else(|| format!("--{name} needs a value"))?;
                    values.insert(name.to_string(), v);
                }
            } else {
                positional.push(w);
            }
        }
        Ok(Args {
            values,
            flags: set,
            positional,
        })
    }

    /// Whether `--name` was given.
    pub fn flag(&self, name: &str) -> bool {
        self.flags.iter().any(|f| f == name)
    }

    /// The raw value of `--name`.
    pub fn get_str(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// The value of `--name` parsed as `T`, or `default`.
    pub fn get<T: FromStr>(&self, name: &str, default: T) -> Result<T, String>
    where
        T::Err: Display,
    {
        match self.values.get(name) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|e| format!("--{name} {v}: {e}")),
        }
    }

    /// Fails on options not in `known`, so typos do not pass silently.
    pub fn reject_unknown(&self, known: &[&str]) -> Result<(), String> {
        for k in self.values.keys().chain(self.flags.iter()) {
            if !known.contains(&k.as_str()) {
                return Err(format!("unknown option --{k}"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn values_flags_and_positionals() {
        let a = Args::parse_from(words("--loss 0.1 --json --seed=7 file"), &["json"]).unwrap();
        assert_eq!(a.get("loss", 0.0).unwrap(), 0.1);
        assert_eq!(a.get("seed", 0u64).unwrap(), 7);
        assert!(a.flag("json"));
        assert_eq!(a.positional, ["file"]);
        assert!(a.reject_unknown(&["loss", "json", "seed"]).is_ok());
        assert!(a.reject_unknown(&["loss"]).is_err());
    }

    #[test]
    fn missing_and_bad_values_are_errors() {
        assert!(Args::parse_from(words("--loss"), &[]).is_err());
        let a = Args::parse_from(words("--rpcs many"), &[]).unwrap();
        assert!(a.get("rpcs", 1u32).is_err());
    }
}
