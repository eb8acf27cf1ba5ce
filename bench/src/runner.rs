//! Benchmark 6, the Pulumi runner's overhead: the wall time of a provisioning run on a
//! Pulumi environment, from the request to `Applied`, against the time the `pulumi` commands
//! of that run took themselves.
//!
//! The Pulumi CLI cannot be installed on these machines, so the runner drives the stand-in CLI
//! of the tests (`tests/stand_ins/pulumi`), which appends each command's own wall time to the
//! file in `PULUMI_STAND_IN_TIMINGS`. The baseline is the sum of those times for the run: what
//! the same commands cost run by hand, one after another. Everything else in the run's wall
//! time is the product: the API, the workflow and its lock, the Git export, the activities,
//! the projections and the observation after the apply.
//!
//! `--resource-seconds` gives each resource's create that long in the stand-in (a cloud API's
//! latency; a real S3 bucket takes seconds). At 0 the stand-in's own start-up (a Python
//! process per command) is all the baseline has, so the ratio is the worst case.

use crate::stack::{Db, Stack, poll};
use crate::stats::{ms, ratio, summarize};
use crate::table::Table;
use anyhow::{Context, bail};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Runs measured one at a time, each on its own environment.
    #[arg(long, default_value_t = 10)]
    pub runs: usize,
    /// Resources in the program.
    #[arg(long, default_value_t = 3)]
    pub resources: usize,
    /// Seconds each resource's create takes in the stand-in (0: the CLI's own cost only).
    #[arg(long, value_delimiter = ',', default_value = "0,1")]
    pub resource_seconds: Vec<f64>,
}

/// The stand-in CLI: `RC_BENCH_PULUMI`, else the one in this repository.
fn stand_in() -> PathBuf {
    std::env::var("RC_BENCH_PULUMI")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/stand_ins/pulumi"))
}

fn git(dir: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@example.com",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .context("git")?;
    if !out.status.success() {
        bail!("git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8(out.stdout)?.trim().to_owned())
}

/// A repository with the program `shop/Pulumi.yaml` of `resources` buckets, each taking
/// `seconds` to create; its `programRef` and commit.
fn repository(dir: &Path, resources: usize, seconds: f64) -> anyhow::Result<(String, String)> {
    std::fs::create_dir_all(dir.join("shop"))?;
    let buckets: serde_json::Map<String, serde_json::Value> = (0..resources)
        .map(|i| {
            let props = json!({ "acl": "private", "applySeconds": seconds });
            (
                format!("bucket-{i}"),
                json!({ "type": "aws:s3/bucket:Bucket", "properties": props }),
            )
        })
        .collect();
    let program = json!({ "name": "shop", "runtime": "yaml", "resources": buckets,
                          "outputs": { "bucketName": "bucket-0" } });
    std::fs::write(
        dir.join("shop/Pulumi.yaml"),
        serde_json::to_string_pretty(&program)?,
    )?;
    git(dir, &["init", "--quiet", "-b", "main"])?;
    git(dir, &["add", "."])?;
    git(dir, &["commit", "--quiet", "-m", "program"])?;
    let commit = git(dir, &["rev-parse", "HEAD"])?;
    Ok((format!("file://{}//shop", dir.display()), commit))
}

/// The commands the stand-in ran since the file was last emptied up to `Applied`, and their
/// summed time. The `refresh` of the observation after the apply comes after `Applied`: it is
/// not on the measured path, on either side.
fn drain(timings: &Path) -> anyhow::Result<(usize, Duration)> {
    let text = std::fs::read_to_string(timings).unwrap_or_default();
    std::fs::write(timings, "")?;
    let mut total = 0.0;
    let mut count = 0;
    for line in text.lines().filter(|l| !l.starts_with("refresh ")) {
        let secs: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|s| s.parse().ok())
            .context("a timing line")?;
        total += secs;
        count += 1;
    }
    Ok((count, Duration::from_secs_f64(total)))
}

/// Whether the observation after the apply has refreshed the stack (the run is done).
fn refreshed(timings: &Path) -> bool {
    std::fs::read_to_string(timings)
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("refresh "))
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let mut table = Table::new(
        &format!(
            "Pulumi runner overhead: {} runs of {} resources each, one at a time (SQLite)",
            args.runs, args.resources
        ),
        &[
            "resource s",
            "CLI commands/run",
            "CLI time p50 ms",
            "run p50 ms",
            "run p95 ms",
            "overhead p50 ms",
            "ratio p50",
        ],
    );
    for &seconds in &args.resource_seconds {
        let work = crate::stack::work_dir()?;
        let timings = work.path().join("timings");
        std::fs::write(&timings, "")?;
        let (program_ref, commit) = repository(&work.path().join("repo"), args.resources, seconds)?;
        let stack = Stack::start_with(
            Db::Sqlite,
            vec![
                (
                    "RUNTIME_CLOUD_PULUMI_BINARY".into(),
                    stand_in().display().to_string(),
                ),
                (
                    "PULUMI_STAND_IN_TIMINGS".into(),
                    timings.display().to_string(),
                ),
            ],
        )
        .await?;
        let api = stack.api();
        let state = work.path().join("state");
        let (mut walls, mut clis, mut ratios, mut commands) = (vec![], vec![], vec![], 0);
        // One warm-up run (the mirror's first clone, the worker's first activities) is not
        // counted.
        for i in 0..=args.runs {
            let env = format!("p{i}");
            api.post(
                "/factory/environments",
                json!({ "environmentId": env, "projectId": "shop", "class": "non-production",
                        "target": { "runner": { "kind": "pulumi", "stack": format!("bench/shop/{env}"),
                                                "backendUrl": format!("file://{}", state.display()) } } }),
                201,
            )
            .await?;
            api.post(
                "/factory/provisioning/specifications",
                json!({ "environmentId": env, "kind": "environment", "programRef": program_ref,
                        "programVersion": commit, "configRefs": {}, "secretRefs": {},
                        "workloads": [] }),
                201,
            )
            .await?;
            drain(&timings)?;
            let started = Instant::now();
            let (id, _) = api.plan_run(&env).await?;
            poll(
                "the run to apply",
                Duration::from_millis(5),
                Duration::from_secs(300),
                || {
                    let api = api.clone();
                    let id = id.clone();
                    async move {
                        let run = api.get(&format!("/factory/provisioning/runs/{id}")).await?;
                        match run["state"].as_str() {
                            Some("Applied") => Ok(Some(())),
                            Some("Failed") => bail!("run {id} failed: {run}"),
                            _ => Ok(None),
                        }
                    }
                },
            )
            .await?;
            let wall = started.elapsed();
            // Let the run's observation after the apply finish before the next run starts.
            poll(
                "the observation after the apply",
                Duration::from_millis(5),
                Duration::from_secs(60),
                || async { Ok(refreshed(&timings).then_some(())) },
            )
            .await?;
            let (n, cli) = drain(&timings)?;
            if i == 0 {
                continue;
            }
            commands = n;
            walls.push(wall);
            clis.push(cli);
            ratios.push(ratio(wall.as_secs_f64(), cli.as_secs_f64()));
        }
        let wall = summarize(&walls);
        let cli = summarize(&clis);
        ratios.sort_by(f64::total_cmp);
        let median_ratio = ratios.get(ratios.len() / 2).copied().unwrap_or(f64::NAN);
        table.row(vec![
            format!("{seconds}"),
            commands.to_string(),
            ms(cli.p50),
            ms(wall.p50),
            ms(wall.p95),
            ms(wall.p50.saturating_sub(cli.p50)),
            format!("{median_ratio:.2} ×"),
        ]);
        stack.stop().await;
    }
    println!("{}", table.render());
    Ok(())
}
