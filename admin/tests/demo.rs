//! The README's quick start: `shardline-admin demo` on a fresh folder prints the fires of its two
//! jobs, every one of them a success from the first, and stops on Ctrl-C; started again in the
//! same folder, it does the same with the jobs it made.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[test]
fn demo_fires_succeed_from_the_first_and_stop_on_ctrl_c() {
    let dir = tempfile::tempdir().unwrap();
    for start in ["first", "second"] {
        run_demo(dir.path(), start);
    }
    assert!(
        dir.path().join("data").exists(),
        "the demo keeps its data in ./data"
    );
}

/// Runs the demo in `dir` until the first two fires of each job are printed, checks them, and
/// stops it with SIGINT.
fn run_demo(dir: &std::path::Path, start: &str) {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    // Started so that its scheduler begins shortly before a 5 s boundary (the admin's start, its
    // password hashed in a debug build, took about a second where this was written): a
    // broadcast prepared at once then found none or some of the demo's three executors
    // registered ("no run: no online executor in the group", "2/2 items succeeded"). The demo
    // creates its jobs, or plans the ones it made before again, once they are all in the
    // registry, at any phase.
    let phase = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis()
        % 5_000;
    // A second start hashes no password and is ready sooner.
    let at: u64 = if start == "first" { 3_500 } else { 4_500 };
    let wait = (at + 5_000 - phase as u64) % 5_000;
    std::thread::sleep(Duration::from_millis(wait));
    let mut child = Command::new(env!("CARGO_BIN_EXE_shardline-admin"))
        .arg("demo")
        .current_dir(dir)
        .env("SHARDLINE_BIND", format!("127.0.0.1:{port}"))
        .env("SHARDLINE_LOG", "warn")
        .env_remove("SHARDLINE_DATABASE_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("admin binary starts");
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });

    // The first two fires of each job, as printed.
    let mut broadcast = Vec::new();
    let mut items = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(40);
    while (broadcast.len() < 2 || items.len() < 2) && Instant::now() < deadline {
        let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) else {
            continue;
        };
        if !line.trim_start().starts_with("fire #") {
            continue;
        }
        if line.contains("demo-broadcast") {
            broadcast.push(line);
        } else if line.contains("demo-items") {
            items.push(line);
        }
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let stopped = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if stopped.elapsed() > Duration::from_secs(15) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };

    assert!(
        broadcast.len() >= 2 && items.len() >= 2,
        "{start} start: two fires of each job within 40 s: {broadcast:?} {items:?}"
    );
    for line in &broadcast[..2] {
        assert!(
            line.contains("3/3 items succeeded"),
            "{start} start: {line}"
        );
    }
    for line in &items[..2] {
        assert!(
            line.contains("8/8 items succeeded"),
            "{start} start: {line}"
        );
    }
    let status = status.expect("the demo stops within 15 s of Ctrl-C");
    assert!(
        status.success(),
        "{start} start: the demo exits cleanly on Ctrl-C: {status}"
    );
}
