//! Links the admin's binaries with packed relative relocations (DT_RELR) where they will run on a
//! glibc that loads them. A position-independent binary's relative relocations are otherwise a
//! table of 24-byte entries (1.2 MiB for the admin) that the loader reads whole at every start
//! and that then stays resident; packed, they are a bitmap of a few KiB.
//!
//! glibc loads DT_RELR from 2.36 on and an older one cannot start such a binary, so the option
//! is only passed for a native Linux/glibc build on a glibc that has it: the glibc asked is the
//! build machine's. GNU ld before 2.38 ignores the option with a warning.

use std::process::Command;

const PACKED_RELOCATIONS: &str = "-Wl,-z,pack-relative-relocs";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let target = std::env::var("TARGET").unwrap_or_default();
    let host = std::env::var("HOST").unwrap_or_default();
    if target != host || !target.ends_with("-linux-gnu") {
        return;
    }
    if glibc_version().is_some_and(|v| v >= (2, 36)) {
        println!("cargo:rustc-link-arg-bins={PACKED_RELOCATIONS}");
        println!("cargo:rustc-link-arg-examples={PACKED_RELOCATIONS}");
    }
}

/// The build machine's glibc as (major, minor), from `getconf GNU_LIBC_VERSION` ("glibc 2.36").
fn glibc_version() -> Option<(u32, u32)> {
    let out = Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let (major, minor) = text.trim().strip_prefix("glibc ")?.split_once('.')?;
    let minor = minor.split('.').next()?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}
