//! Puts the link script where the linker finds it and links the program with it.

use std::env;
use std::fs;
use std::path::PathBuf;

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    fs::write(out.join("smartnic.ld"), include_bytes!("smartnic.ld")).expect("write smartnic.ld");
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rustc-link-arg-bins=-Tsmartnic.ld");
    println!("cargo:rerun-if-changed=smartnic.ld");
    println!("cargo:rerun-if-changed=build.rs");
}
