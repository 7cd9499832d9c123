//! gslbd: the GSLB DNS server daemon. Everything lives in the library; this parses flags.

use std::{path::PathBuf, process::ExitCode};

use clap::Parser;
use gslb_user::{
    control::{ControlPath, DEFAULT_CONTROL_PATH},
    daemon::{self, Overrides},
    dataplane::XdpMode,
};

#[derive(Parser)]
#[command(
    name = "gslbd",
    version,
    about = "GSLB authoritative DNS server with an XDP fast path"
)]
struct Args {
    /// Configuration file (TOML).
    #[arg(long, short)]
    config: PathBuf,
    /// Interface to attach the XDP fast path to (overrides server.interface).
    #[arg(long)]
    interface: Option<String>,
    /// auto (native, falling back to skb), native or skb (overrides server.xdp_mode).
    #[arg(long)]
    xdp_mode: Option<XdpMode>,
    /// bpffs directory for the pins (overrides server.pin_path).
    #[arg(long)]
    pin_path: Option<PathBuf>,
    /// Leave XDP attached and pinned on exit, so answers continue without gslbd.
    #[arg(long)]
    keep_attached: bool,
    /// Address to answer DNS on (repeatable; replaces server.listen).
    #[arg(long)]
    listen: Vec<std::net::IpAddr>,
    /// DNS port (replaces server.dns_port).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    port: Option<u16>,
    /// Control socket for gslbctl (reload, ldns, stats) [default: /run/gslbd.sock].
    #[arg(long, value_name = "PATH")]
    control: Option<PathBuf>,
    /// Serve with the responder alone, loading nothing into the kernel.
    #[arg(long, conflicts_with_all = ["interface", "xdp_mode", "keep_attached"])]
    no_xdp: bool,
    /// Log lines on stderr: text, for people, or json (one object a line), for log shippers.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let logs = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr);
    match args.log_format {
        LogFormat::Text => logs.init(),
        // The event's fields at the top level, beside timestamp, level and target.
        LogFormat::Json => logs.json().flatten_event(true).init(),
    }
    match serve(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("gslbd: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn serve(args: Args) -> anyhow::Result<()> {
    let overrides = Overrides {
        interface: args.interface,
        xdp_mode: args.xdp_mode,
        pin_path: args.pin_path,
        keep_attached: args.keep_attached,
        no_xdp: args.no_xdp,
        listen: args.listen,
        port: args.port,
        control: Some(ControlPath {
            required: args.control.is_some(),
            path: args.control.unwrap_or_else(|| DEFAULT_CONTROL_PATH.into()),
        }),
    };
    // What needs root is opened on this one thread, before the runtime starts its threads:
    // capabilities are per thread, and the ones started after the drop inherit the reduced set.
    let config = daemon::load_config(&args.config, &overrides)?;
    let started = daemon::Started::open(&config, &overrides)?;
    if let Some(user) = &config.server.user {
        started.drop_privileges(user)?;
    }
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let shutdown = daemon::signals().await?;
        // Tests and scripts wait for this line on stdout.
        let ready = || println!("gslbd: ready");
        let reloads = daemon::reload_signals()?;
        Box::pin(daemon::run(
            args.config,
            config,
            overrides,
            started,
            ready,
            shutdown,
            reloads,
        ))
        .await?;
        Ok(())
    })
}
