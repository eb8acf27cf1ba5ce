//! Benchmark 5 (first half): the memory of `runtime-cloud dev` at rest.
//!
//! `runtime-cloud dev` is started on a fresh data dir with its own Temporal dev server (on free
//! ports), left idle, and its resident set read: at rest after `seconds`, and the peak since it
//! started (`VmHWM`). The Temporal server it starts is a separate process and reported apart.
//! Baseline: the minimal SDK worker of [`crate::baseline`], idle for as long, against the
//! benchmark's Temporal server. (The worker's peak under the fleet sweep is in the fleet table.)

use crate::rss::{self, Rss};
use crate::stack::{self, Proc};
use crate::table::{Table, ratio_cell};
use anyhow::{Context, bail};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Seconds at rest before reading the memory.
    #[arg(long, default_value_t = 30)]
    pub seconds: u64,
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Every process below `pid`.
fn descendants(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut todo = rss::children(pid);
    while let Some(p) = todo.pop() {
        todo.extend(rss::children(p));
        out.push(p);
    }
    out
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let dir = stack::work_dir()?;
    let (temporal_port, ui_port) = (free_port()?, free_port()?);
    println!(
        "idle: runtime-cloud dev (Temporal on :{temporal_port}), {} s at rest",
        args.seconds
    );
    let mut child = Command::new(stack::product_bin())
        .args([
            "dev",
            "--temporal-port",
            &temporal_port.to_string(),
            "--ui-port",
            &ui_port.to_string(),
        ])
        .env("RUNTIME_CLOUD_DATA_DIR", dir.path())
        .env("RUNTIME_CLOUD_LISTEN", "127.0.0.1:0")
        .env_remove("DATABASE_URL")
        .env_remove("TEMPORAL_ADDRESS")
        .env_remove("RUNTIME_CLOUD_TASK_QUEUE")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stack::log_file(dir.path(), "dev")?)
        .spawn()
        .context("spawn runtime-cloud dev")?;
    let stdout = child.stdout.take().context("dev stdout")?;
    let dev = Proc { child };
    let ready = tokio::task::spawn_blocking(move || {
        let mut lines = BufReader::new(stdout).lines();
        let ready = lines
            .by_ref()
            .map_while(Result::ok)
            .any(|l| l.contains("Temporal UI"));
        std::thread::spawn(move || for _ in lines.map_while(Result::ok) {});
        ready
    })
    .await?;
    if !ready {
        bail!(
            "runtime-cloud dev did not start; see {}/dev.log",
            dir.path().display()
        );
    }
    let baseline_tq = format!("baseline-{}", stack::suffix());
    let baseline = crate::baseline::spawn_worker(&baseline_tq, dir.path())?;
    tokio::time::sleep(Duration::from_secs(args.seconds)).await;

    let product = rss::of(dev.pid());
    let server_pids = descendants(dev.pid());
    let server = server_pids
        .iter()
        .map(|p| rss::of(*p))
        .fold(Rss::default(), |a, b| Rss {
            now_mib: a.now_mib + b.now_mib,
            peak_mib: a.peak_mib + b.peak_mib,
        });
    let base = rss::of(baseline.pid());
    // SIGTERM lets `dev` stop the Temporal server it started; then make sure of it.
    let _ = Command::new("kill")
        .args(["-TERM", &dev.pid().to_string()])
        .status();
    tokio::time::sleep(Duration::from_secs(3)).await;
    drop(dev);
    for p in server_pids {
        if std::path::Path::new(&format!("/proc/{p}")).exists() {
            let _ = Command::new("kill")
                .args(["-KILL", &p.to_string()])
                .status();
        }
    }
    drop(baseline);

    let mut t = Table::new(
        &format!("Memory at rest ({} s idle)", args.seconds),
        &["process", "RSS at rest MiB", "peak RSS since start MiB"],
    );
    let row = |name: &str, r: Rss| {
        vec![
            name.to_owned(),
            format!("{:.0}", r.now_mib),
            format!("{:.0}", r.peak_mib),
        ]
    };
    t.row(row("runtime-cloud dev (API + worker + SQLite)", product));
    t.row(row("baseline: minimal SDK worker, no-op activities", base));
    t.row(vec![
        "product / baseline".into(),
        ratio_cell(product.now_mib / base.now_mib),
        ratio_cell(product.peak_mib / base.peak_mib),
    ]);
    t.row(row(
        "(the Temporal dev server `dev` started, not the product)",
        server,
    ));
    t.print();
    Ok(())
}
