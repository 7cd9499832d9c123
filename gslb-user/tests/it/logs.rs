//! gslbd's log formats: `--log-format json` writes one JSON object a line on stderr, with the
//! event's fields at the top level (for log shippers); the default stays text.

use std::{
    io::{BufRead, BufReader},
    process::{Command, Stdio},
};

use gslb_tests::TempDir;

use crate::common::{self, PortTaken};

/// The first stderr lines of a gslbd started with `args` on a responder-only configuration,
/// up to its "gslbd ready" log line.
fn first_lines(tag: &str, args: &[&str]) -> Vec<String> {
    let dir = TempDir::new(tag);
    let config = dir.0.join("gslb.toml");
    // A gslbd child binds the port its file names itself: picked again if it was taken.
    common::start_on_picked_port("127.0.0.1", "a gslbd child process", |port| {
        std::fs::write(
            &config,
            format!(
                "[server]\nlisten = [\"127.0.0.1\"]\ndns_port = {port}\n\n[[zone]]\nname = \"example.com\"\n\
                 ns = [\"ns1.example.net\"]\nsoa.rname = \"hostmaster.example.com\"\n"
            ),
        )
        .unwrap();
        let mut gslbd = Command::new(env!("CARGO_BIN_EXE_gslbd"))
            .args(["--no-xdp", "--config"])
            .arg(&config)
            .arg("--control")
            .arg(dir.0.join("gslbd.sock"))
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = Vec::new();
        let mut ready = false;
        for line in BufReader::new(gslbd.stderr.take().unwrap()).lines() {
            let line = line.unwrap();
            ready = line.contains("gslbd ready");
            lines.push(line);
            if ready || lines.len() > 100 {
                break;
            }
        }
        let _ = gslbd.kill();
        let _ = gslbd.wait();
        if !ready && lines.iter().any(|l| l.contains("in use")) {
            return Err(PortTaken(lines.join("\n")));
        }
        Ok(lines)
    })
}

#[test]
fn json_logs_are_one_object_a_line() {
    let lines = first_lines("logjson", &["--log-format", "json"]);
    assert!(
        lines.last().is_some_and(|l| l.contains("gslbd ready")),
        "{lines:#?}"
    );
    for line in &lines {
        let event: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(event["timestamp"].is_string(), "{line}");
        assert!(event["level"].is_string(), "{line}");
    }
    let ready: serde_json::Value = serde_json::from_str(lines.last().unwrap()).unwrap();
    assert_eq!(ready["message"], "gslbd ready");
    assert_eq!(ready["level"], "INFO");
    assert_eq!(ready["target"], "gslb_user::daemon");
    // A structured field, at the top level.
    assert!(ready["port"].is_u64(), "{ready}");
}

#[test]
fn text_logs_stay_the_default() {
    let lines = first_lines("logtext", &[]);
    let ready = lines.last().expect("a log line");
    assert!(ready.contains("gslbd ready"), "{lines:#?}");
    assert!(
        serde_json::from_str::<serde_json::Value>(ready).is_err(),
        "{ready}"
    );
}
