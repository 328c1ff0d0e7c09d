//! The README and `docs/` hold together: every guide is linked from the
//! README and compiled as doctests, every relative link leads to a file,
//! and the README's test command is the one CI runs.

use std::fs;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The names of the files in `docs/` ending in `.md`, sorted.
fn guides() -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".md"))
        .collect();
    names.sort();
    names
}

/// The targets of the Markdown links `[text](target)` in `text`.
fn link_targets(text: &str) -> Vec<&str> {
    text.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &text[at + 2..];
            rest.find(')').map(|end| &rest[..end])
        })
        .collect()
}

#[test]
fn every_guide_is_linked_from_the_readme() {
    let readme = read(&repo().join("README.md"));
    let targets = link_targets(&readme);
    for name in guides() {
        let target = format!("docs/{name}");
        assert!(
            targets.contains(&target.as_str()),
            "README.md does not link {target}"
        );
    }
}

#[test]
fn every_guide_is_compiled_as_doctests() {
    let lib = read(&repo().join("tests/src/lib.rs"));
    for name in guides() {
        let path = format!("\"../../docs/{name}\"");
        assert!(
            lib.contains(&path),
            "tests/src/lib.rs does not include docs/{name}"
        );
    }
}

#[test]
fn relative_links_lead_to_files() {
    let mut files = vec![repo().join("README.md")];
    files.extend(guides().iter().map(|name| repo().join("docs").join(name)));
    for file in files {
        let text = read(&file);
        let dir = file.parent().unwrap();
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with('#') {
                continue;
            }
            let path = target.split('#').next().unwrap();
            assert!(
                dir.join(path).exists(),
                "{}: the link to {target} leads nowhere",
                file.display()
            );
        }
    }
}

#[test]
fn the_readme_test_command_is_the_one_ci_runs() {
    let readme = read(&repo().join("README.md"));
    let ci = read(&repo().join(".ci/run"));
    let command = readme
        .lines()
        .find(|line| line.starts_with("cargo test --workspace"))
        .expect("README.md shows no `cargo test --workspace` line");
    assert!(
        ci.lines().any(|line| line == format!("CI=1 {command}")),
        ".ci/run does not run the README's test command `{command}`"
    );
}

#[test]
fn the_readme_stays_a_front_page() {
    // Details belong in docs/; the README says what this is, how to start,
    // and where to read on.
    let lines = read(&repo().join("README.md")).lines().count();
    assert!(
        lines <= 260,
        "README.md has {lines} lines; move details to docs/"
    );
}
