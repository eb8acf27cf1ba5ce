//! `rc-bench`: the benchmarks of Runtime Cloud. Run them with `scripts/bench`, which builds in
//! release mode, starts a Temporal dev server and sets `RC_BENCH_TEMPORAL_ADDRESS`.

use clap::{Parser, Subcommand};
use runtime_cloud_bench::{
    fairness, fleet, idle, minutes, read, rollout, runner, throughput, watch,
};

#[derive(Debug, Parser)]
#[command(
    name = "rc-bench",
    about = "Benchmarks of Runtime Cloud, each against a baseline"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// 1. Provisioning runs per second and request-to-Applied latency.
    Throughput(throughput::Args),
    /// 2. One observation sweep over a fleet.
    Fleet(fleet::Args),
    /// 4. The read API at fixed request rates.
    Read(read::Args),
    /// 5. Memory of `runtime-cloud dev` at rest.
    Idle(idle::Args),
    /// 6. The Pulumi runner's overhead over the CLI commands it runs.
    Runner(runner::Args),
    /// 7. A fleet rollout over many instances next to bare provisioning runs.
    Rollout(rollout::Args),
    /// 8. One tenant's runs while another floods the stack, next to the same runs idle.
    Fairness(fairness::Args),
    /// 9. The day's apply minutes a run's start sums, with and without their index.
    Minutes(minutes::Args),
    /// 10. An out-of-band change on a watched cluster, observed, next to the sweep alone.
    Watch(watch::Args),
    /// 3. The drift comparer next to a baseline (no server).
    Compare,
    /// The baseline worker (started by the benchmarks as its own process).
    #[command(hide = true)]
    BaselineWorker {
        #[arg(long)]
        task_queue: String,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().command {
        Command::Throughput(args) => throughput::run(args).await,
        Command::Fleet(args) => fleet::run(args).await,
        Command::Watch(args) => watch::run(args).await,
        Command::Read(args) => read::run(args).await,
        Command::Idle(args) => idle::run(args).await,
        Command::Runner(args) => runner::run(args).await,
        Command::Rollout(args) => rollout::run(args).await,
        Command::Fairness(args) => fairness::run(args).await,
        Command::Minutes(args) => minutes::run(args).await,
        Command::Compare => {
            runtime_cloud_bench::comparer::run();
            Ok(())
        }
        Command::BaselineWorker { task_queue } => {
            let address = runtime_cloud_bench::stack::temporal_address()?;
            runtime_cloud_bench::baseline::run_worker(&address, &task_queue).await
        }
    }
}
