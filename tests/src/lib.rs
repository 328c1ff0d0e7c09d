//! Integration tests that cross homa-stack and homa-phy live in `tests/`.
//! This library only makes the README's code examples compile and run as
//! doctests, so the README cannot drift from the API.

#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
mod readme {}
