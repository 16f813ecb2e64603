//! `cargo xtask test`: the one test command, the one CI runs.

use anyhow::{bail, Result};

use crate::tools::{self, cargo, ensure_installed};

pub fn run_all() -> Result<()> {
    // Tests start their own redis-server processes (clusters joined by redis-cli, Sentinels
    // by redis-sentinel), the report test opens the report in headless Chromium, and the Lua
    // bridge's tests run once more under valgrind.
    ensure_installed(&[
        ("redis-server", "redis-server"),
        ("redis-cli", "redis-tools"),
        ("redis-sentinel", "redis-sentinel"),
        ("chromium", "chromium"),
        ("valgrind", "valgrind"),
    ])?;

    for manifest in ["Cargo.toml", "tests/adopter/Cargo.toml"] {
        let mut fmt = cargo();
        fmt.args(["fmt", "--all", "--manifest-path", manifest, "--", "--check"]);
        tools::run(fmt)?;
    }

    let mut clippy = cargo();
    clippy.args(["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"]);
    tools::run(clippy)?;

    let mut test = cargo();
    // The property suites run once, below, with their case counts printed.
    // --show-output: the suites print what they covered (conformance cases agreed, swarm
    // seeds held, agreement requests), and a count is only worth having if it is seen.
    test.args(["test", "--workspace", "--exclude", "properties", "--", "--show-output"]);
    tools::run(test)?;

    published_crates_package_and_build()?;
    an_adopter_outside_the_workspace()?;
    limiter_tests_on_the_model()?;
    lua_bridge_under_memcheck()?;
    real_lanes_over_the_whole_catalogue()?;

    crate::props::run(crate::props::DEFAULT_CASES)?;
    crate::loom::run()?;
    Ok(())
}

/// The crates published for users, packaged as the registry would take them and built from the
/// packages alone (`cargo publish --dry-run` packs, unpacks and builds each, the library against
/// the packed scripts crate): a file read from outside a crate's folder, a path dependency
/// without a version or missing metadata fails here, not at release time.
fn published_crates_package_and_build() -> Result<()> {
    let mut publish = cargo();
    publish.args(["publish", "--dry-run", "--allow-dirty"]);
    for package in crate::PUBLISHED {
        publish.args(["-p", package]);
    }
    tools::run(publish)
}

/// A project of someone else's (`tests/adopter`, its own workspace) depends on the library by
/// path with the features a registry user gets, and its tests drive `ratelimit-lab` installed
/// by `cargo install --path sim`, as that project's CI would. The install goes to
/// `target/adopter/install` (never the user's `~/.cargo/bin`) and reuses this workspace's
/// build; the adopter builds in a target directory of its own, since nothing of the workspace
/// (features, profiles) may reach it.
fn an_adopter_outside_the_workspace() -> Result<()> {
    let root = tools::root();
    let adopter = root.join("target/adopter");
    let mut install = cargo();
    install.args(["install", "--locked", "--debug", "--quiet", "--path", "sim", "--root"]).arg(adopter.join("install"));
    install.env("CARGO_TARGET_DIR", root.join("target"));
    tools::run(install)?;
    let mut test = cargo();
    test.args(["test", "--locked", "--manifest-path", "tests/adopter/Cargo.toml"]);
    test.env("CARGO_TARGET_DIR", adopter.join("target"));
    test.env("RATELIMIT_LAB", adopter.join("install/bin/ratelimit-lab"));
    tools::run(test)
}

/// The slow step: every known positive of the model lane over the whole catalogue, on one real
/// `redis-server` and on a real Redis Cluster with replicas (`sim/tests/real_catalogue.rs`),
/// and correct scripts verified with `--backend redis` (`sim/tests/verify_real.rs`); feature
/// `slow-tests`, about five minutes of real time.
fn real_lanes_over_the_whole_catalogue() -> Result<()> {
    let mut test = cargo();
    test.args(["test", "-p", "sim", "--features", "slow-tests", "--test", "real_catalogue", "--test", "verify_real"]);
    test.args(["--", "--show-output", "--test-threads", "1"]);
    tools::run(test)
}

/// The model's Lua bridge (`sim/model/src/lua_stack.rs`) is the one module in the workspace
/// with unsafe code. Its tests (out-of-memory paths included) and the generated-script
/// conformance suite run once more under valgrind's memcheck, which fails them on any invalid
/// read or write, use of uninitialised memory or bad free they provoke. The other conformance
/// suites would take minutes there and go through the same code.
fn lua_bridge_under_memcheck() -> Result<()> {
    let runner = "target.'cfg(all())'.runner = ['valgrind', '-q', '--error-exitcode=9']";
    let mut model = cargo();
    model.args(["test", "-p", "redis-model", "--lib", "--config", runner]);
    tools::run(model)?;
    let mut conformance = cargo();
    conformance.args(["test", "-p", "redis-tests", "--test", "conformance_lua", "--config", runner]);
    tools::run(conformance)
}

/// The second pass: the limiter's own Redis tests once more, with `redis-model` standing in
/// for `redis-server` (`REDIS_TESTS_SERVER`, see `tests/src/lib.rs`). Whatever the limiter
/// relies on Redis for, the model must do the same, or the simulations built on it prove
/// nothing about the real thing.
fn limiter_tests_on_the_model() -> Result<()> {
    let mut build = cargo();
    build.args(["build", "-p", "redis-model", "--bin", "redis-model"]);
    tools::run(build)?;

    let root = tools::root();
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        // Cargo reads a relative target dir from where it runs: the workspace root here.
        Some(dir) => root.join(dir),
        None => root.join("target"),
    };
    let model = target.join("debug").join(format!("redis-model{}", std::env::consts::EXE_SUFFIX));
    if !model.is_file() {
        bail!("built redis-model but found no binary at {}", model.display());
    }
    println!("running the limiter's Redis tests against the Redis model ({})", model.display());
    let mut test = cargo();
    test.args(["test", "-p", "redis-tests"])
        .args(["--test", "agreement", "--test", "redis_store", "--test", "outage", "--test", "bad_input"])
        .env("REDIS_TESTS_SERVER", &model);
    tools::run(test)
}
