//! The location files' watch rebuilds the database off gslbd's controller loop: a rebuild that
//! takes long (a large database, a slow disk) holds up no other event. In-process gslbd, the
//! responder alone, no privileges.

use crate::common;

use std::{
    io::Write,
    net::{IpAddr, TcpListener},
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use common::{Gslbd, answer_addrs, answer_becomes, ask_loopback};
use gslb_tests::TempDir;
use hickory_proto::rr::RecordType;

use super::daemon::{located_config, nsgeo};

const WAIT: Duration = Duration::from_secs(20);

/// The A answer for app.example.com.
async fn app(port: u16) -> Vec<IpAddr> {
    tokio::task::spawn_blocking(move || {
        answer_addrs(&ask_loopback(port, "app.example.com.", RecordType::A))
    })
    .await
    .unwrap()
}

/// A location file that is a FIFO: whoever reads it blocks until the test writes it, as a
/// read of a slow disk would. On drop (a failed test too) its reader gets the end of file and
/// a plain file takes its place, so that no later rebuild blocks.
struct SlowFile {
    path: PathBuf,
    writer: Option<std::fs::File>,
}

impl SlowFile {
    /// Replaces the file at `path` by a FIFO.
    fn replace(path: &Path) -> SlowFile {
        std::fs::remove_file(path).unwrap();
        let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        let rc = unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) };
        assert_eq!(rc, 0, "mkfifo: {}", std::io::Error::last_os_error());
        SlowFile {
            path: path.to_owned(),
            writer: None,
        }
    }

    /// Waits until someone has the FIFO open for reading (the watch's rebuild; it polls every
    /// 2 s) and opens it for writing, which leaves the reader blocked in its read until
    /// [`SlowFile::finish`].
    async fn wait_for_reader(&mut self) {
        let deadline = Instant::now() + WAIT;
        loop {
            // Without a reader, a non-blocking open for writing fails (ENXIO).
            match std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&self.path)
            {
                Ok(writer) => {
                    self.writer = Some(writer);
                    return;
                }
                Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {}
                Err(e) => panic!("open the FIFO for writing: {e}"),
            }
            assert!(
                Instant::now() < deadline,
                "the location files were not read again"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Gives the reader `text` and the end of the file.
    fn finish(&mut self, text: &str) {
        let mut writer = self.writer.take().expect("a reader");
        writer.write_all(text.as_bytes()).unwrap();
    }
}

impl Drop for SlowFile {
    fn drop(&mut self) {
        self.writer = None;
        let plain = self.path.with_extension("plain");
        if std::fs::write(&plain, "").is_ok() {
            let _ = std::fs::rename(&plain, &self.path);
        }
    }
}

/// While the watch's rebuild is stuck reading the changed location file, a health change still
/// reaches the answers (the controller loop goes on); the rebuilt database is applied once the
/// read ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_location_rebuild_holds_up_no_other_event() {
    let dir = TempDir::new("location-watch");
    let (path, csv) = (dir.0.join("gslb.toml"), dir.0.join("locations.csv"));
    let (port, dns) = common::bound_dns();
    std::fs::write(&csv, nsgeo("EU", "GB")).unwrap();
    let backends: Vec<TcpListener> = (0..2)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let netscaler = format!(
        "[[locations.file]]\npath = \"{}\"\nformat = \"netscaler\"",
        csv.display()
    );
    let mut text = located_config(port, &netscaler);
    text.push_str(
        "\n[[monitor]]\nname = \"tcp\"\ntype = \"tcp\"\ninterval_ms = 50\ntimeout_ms = 200\n\
         fall = 2\nrise = 1\n",
    );
    for (i, backend) in backends.iter().enumerate() {
        text.push_str(&format!(
            "[[service]]\nname = \"app{i}\"\nip = \"127.0.0.1\"\nport = {}\n\
             public_ip = \"198.51.100.{}\"\nsite = \"dc\"\nmonitors = [\"tcp\"]\n",
            backend.local_addr().unwrap().port(),
            11 + i
        ));
    }
    text.push_str(
        "[[gslb_domain]]\nname = \"app.example.com\"\nanswer = \"all\"\n\
         services = [\"app0\", \"app1\"]\n",
    );
    std::fs::write(&path, text).unwrap();

    let gslbd = Gslbd::start_bound(&path, dns, None, WAIT).await;
    answer_becomes(port, &["198.51.100.1"]).await;
    let both: Vec<IpAddr> = vec![
        "198.51.100.11".parse().unwrap(),
        "198.51.100.12".parse().unwrap(),
    ];
    let deadline = Instant::now() + WAIT;
    while app(port).await != both {
        assert!(Instant::now() < deadline, "app.example.com never had both");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let mut slow = SlowFile::replace(&csv);
    slow.wait_for_reader().await;
    // The rebuild now waits for the file. A backend goes: its service leaves the answers.
    let mut backends = backends;
    drop(backends.remove(0));
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let got = app(port).await;
        if got == both[1..] {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "a health change did not reach the answers while the location file was being \
             read: still {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The read ends: the new database (the client in North America) is applied.
    slow.finish(&nsgeo("NA", "US"));
    answer_becomes(port, &["198.51.100.2"]).await;

    drop(slow);
    drop(backends);
    gslbd.stop().await;
}

/// A configuration reload reads its location files on a blocking thread too: on a runtime of
/// one thread, another task runs while the reload waits for a file that is slow to read, and
/// the reload ends once the file does. (Read inline, the reload held the runtime's one thread
/// and nothing else ran until the file was written.)
#[test]
fn a_reload_reads_its_location_files_off_the_runtime() {
    let dir = TempDir::new("location-reload");
    let (path, csv) = (dir.0.join("gslb.toml"), dir.0.join("locations.csv"));
    std::fs::write(&csv, nsgeo("EU", "GB")).unwrap();
    let netscaler = format!(
        "[[locations.file]]\npath = \"{}\"\nformat = \"netscaler\"",
        csv.display()
    );
    std::fs::write(&path, located_config(53_053, &netscaler)).unwrap();
    let overrides = gslb_user::daemon::Overrides::default();
    let running = gslb_user::daemon::load_config(&path, &overrides).unwrap();
    let mut slow = SlowFile::replace(&csv);
    let (ticked, ticks) = std::sync::mpsc::channel();
    let (done, reloaded) = std::sync::mpsc::channel();
    let runtime = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async move {
                tokio::spawn(async move {
                    loop {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        if ticked.send(()).is_err() {
                            return;
                        }
                    }
                });
                let outcome = gslb_user::daemon::reload(&path, &overrides, &running).await;
                done.send(outcome.map(|(_, db, _)| db.is_some())).unwrap();
            });
    });
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(slow.wait_for_reader());
    // The reload is in its read: the other task still runs.
    let seen = (0..5)
        .filter(|_| ticks.recv_timeout(Duration::from_secs(2)).is_ok())
        .count();
    slow.finish(&nsgeo("NA", "US"));
    drop(slow);
    let outcome = reloaded.recv_timeout(WAIT).expect("the reload ended");
    assert_eq!(seen, 5, "the runtime was held while the file was read");
    assert!(
        matches!(outcome, Ok(true)),
        "the reload with its database: {outcome:?}"
    );
    drop(ticks);
    runtime.join().unwrap();
}
