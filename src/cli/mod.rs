//! The operator CLI: `runtime-cloud runs|envs|proposals|specs|rollouts|quarantines|fleet …` and
//! `login`, talking to the API with the operator's token, like `argocd` or `tfe`. Every command
//! is one or two API calls; the API decides (scopes, roles, tenancy), the CLI prints and sets the exit
//! code (`docs/cli.md`).

mod client;
mod login;
mod output;

pub use client::Remote;

use clap::Subcommand;
use client::{Client, Failure, Outcome, escape, with_query};
use output::{Column, Format, fields, list, render};
use runtime_cloud_models::ProvisioningState;
use serde_json::{Value, json};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::time::Duration;

/// `--limit` and `--cursor` of a list.
#[derive(Debug, Clone, clap::Args)]
pub struct Paging {
    /// At most this many (the API's default 50, at most 200).
    #[arg(long)]
    limit: Option<u64>,
    /// The page after a previous answer's `nextCursor`.
    #[arg(long)]
    cursor: Option<String>,
}

impl Paging {
    fn params(&self) -> [(&'static str, Option<String>); 2] {
        [
            ("limit", self.limit.map(|l| l.to_string())),
            ("cursor", self.cursor.clone()),
        ]
    }
}

/// `runtime-cloud runs …`.
#[derive(Debug, Subcommand)]
pub enum Runs {
    /// Provisioning runs, newest first.
    List {
        /// Only this environment's.
        #[arg(long = "env")]
        environment: Option<String>,
        /// `baseline`, `promotion`, `reconciliation` or `decommission`.
        #[arg(long)]
        kind: Option<String>,
        /// A state such as `AwaitingApproval`.
        #[arg(long)]
        state: Option<String>,
        #[command(flatten)]
        paging: Paging,
    },
    /// One run: its state, plan, approval, receipts.
    Get { id: String },
    /// Plan a run of an environment's current (or a given) specification.
    Plan {
        #[arg(long = "env")]
        environment: String,
        /// `baseline`, `promotion`, `reconciliation` or `decommission`.
        #[arg(long, default_value = "baseline")]
        kind: String,
        /// A specification version other than the newest.
        #[arg(long)]
        version: Option<i32>,
        /// Run it although it carries a quarantined version, for this reason (an Operator's
        /// call, recorded on the run).
        #[arg(long = "override-quarantine", value_name = "REASON")]
        override_quarantine: Option<String>,
    },
    /// Approve a production run's plan: shows the plan and asks unless `--yes`.
    Approve {
        id: String,
        /// Why (a change ticket …), recorded with the approval.
        #[arg(long, default_value = "")]
        reason: String,
        /// Do not ask.
        #[arg(long)]
        yes: bool,
    },
    /// Reject a production run's plan.
    Reject {
        id: String,
        #[arg(long)]
        reason: String,
    },
    /// Cancel a run that has not started applying.
    Cancel {
        id: String,
        #[arg(long, default_value = "")]
        reason: String,
    },
    /// The run's plan and apply logs.
    Logs {
        id: String,
        /// `plan` or `apply`; both when absent.
        #[arg(long)]
        phase: Option<String>,
        /// Keep printing as the run moves, until it ends.
        #[arg(long, short = 'f')]
        follow: bool,
    },
}

/// `runtime-cloud envs …`.
#[derive(Debug, Subcommand)]
pub enum Envs {
    /// Environments of the tenant, by id.
    List {
        #[command(flatten)]
        paging: Paging,
    },
    /// One environment.
    Get { id: String },
    /// Observe it now.
    Observe { id: String },
    /// What was observed: workloads, versions, replicas, health.
    Inventory { id: String },
    /// Drift and posture findings.
    Drift {
        id: String,
        /// `open`, `resolved` or `suppressed`.
        #[arg(long)]
        state: Option<String>,
        /// One kind only: `version`, `replica`, `configuration`, `missing`, `unmanaged`,
        /// `secret-binding` or `posture` (security posture rules broken).
        #[arg(long)]
        kind: Option<String>,
        #[command(flatten)]
        paging: Paging,
    },
    /// Move an ephemeral environment's expiry: `--ttl 2h` from now, or `--until` a time.
    Extend {
        id: String,
        /// The new time to live, from now (`20s`, `90m`, `72h`, `7d`).
        #[arg(long, conflicts_with = "until", required_unless_present = "until")]
        ttl: Option<String>,
        /// The new expiry (RFC 3339).
        #[arg(long)]
        until: Option<String>,
    },
    /// Decommission it now: a `decommission` run destroys what it runs, then it is retired
    /// (an Operator's call; in production the run waits for an approval).
    Decommission {
        id: String,
        /// Why.
        #[arg(long, default_value = "")]
        reason: String,
    },
}

/// `runtime-cloud proposals …`.
#[derive(Debug, Subcommand)]
pub enum Proposals {
    /// Reconciliation proposals, newest first.
    List {
        #[arg(long = "env")]
        environment: Option<String>,
        /// `Proposed`, `Accepted`, `Rejected` …
        #[arg(long)]
        state: Option<String>,
        #[command(flatten)]
        paging: Paging,
    },
    /// Accept a proposal: its reconciliation run starts.
    Accept {
        id: String,
        #[arg(long, default_value = "")]
        reason: String,
    },
    /// Reject a proposal.
    Reject {
        id: String,
        #[arg(long)]
        reason: String,
    },
    /// Adopt a proposal's unmanaged workloads into its environment's Pulumi program: the code
    /// `pulumi import` generates is committed on the branch `runtime-cloud/adopt/ID` for review.
    Adopt { id: String },
    /// A proposal's adoption: its state, branch, commit and diff (or why it failed).
    Adoption { id: String },
}

/// `runtime-cloud specs …`.
#[derive(Debug, Subcommand)]
pub enum Specs {
    /// Declare the next version from a file (YAML or JSON, the API's fields).
    Declare {
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
    },
    /// Specification versions, newest first.
    List {
        #[arg(long = "env")]
        environment: Option<String>,
        #[command(flatten)]
        paging: Paging,
    },
}

/// `runtime-cloud rollouts …`.
#[derive(Debug, Subcommand)]
pub enum Rollouts {
    /// Fleet rollouts, newest first.
    List {
        #[command(flatten)]
        paging: Paging,
    },
    /// One rollout: its waves, instances and halt reason.
    Get { id: String },
    /// Start a rollout from a file (YAML or JSON, the API's fields).
    Start {
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
    },
    /// Resume a halted rollout.
    Resume { id: String },
    /// Abort a rollout.
    Abort { id: String },
    /// Roll a halted rollout back: its release is quarantined and every instance it moved runs
    /// back to its previous specification.
    Rollback { id: String },
}

/// `runtime-cloud quarantines …`.
#[derive(Debug, Subcommand)]
pub enum Quarantines {
    /// Quarantined versions, newest first.
    List {
        /// `in-force` or `lifted`.
        #[arg(long)]
        state: Option<String>,
        /// Only this workload's.
        #[arg(long)]
        workload: Option<String>,
        #[command(flatten)]
        paging: Paging,
    },
    /// Quarantine a workload's version for the tenant: nothing automatic applies it.
    Place {
        #[arg(long)]
        workload: String,
        #[arg(long)]
        version: String,
        /// Why it must not run.
        #[arg(long)]
        reason: String,
    },
    /// Lift a quarantine: the version may be applied again.
    Lift {
        id: String,
        /// Why it may run again.
        #[arg(long)]
        reason: String,
    },
}

/// `runtime-cloud fleet …`.
#[derive(Debug, Subcommand)]
pub enum Fleet {
    /// Counts across the fleet.
    Summary,
    /// Instances with their health, by environment id.
    Instances {
        #[command(flatten)]
        paging: Paging,
    },
    /// Order an instance off-boarded: its record is exported and verified, then it is
    /// decommissioned (an Operator's call; in production the run waits for an approval).
    Offboard {
        id: String,
        /// Why it leaves operation.
        #[arg(long)]
        reason: String,
    },
    /// Off-boarding orders, newest first.
    Orders {
        /// `exporting`, `exported`, `decommissioning`, `completed` or `failed`.
        #[arg(long)]
        state: Option<String>,
        #[command(flatten)]
        paging: Paging,
    },
    /// What the instances cost an hour at the tenant's prices, by environment id, with the
    /// totals by product and customer tenant.
    Costs {
        /// Only this product's instances.
        #[arg(long)]
        product: Option<String>,
        /// Only this customer tenant's instances.
        #[arg(long)]
        customer: Option<String>,
        #[command(flatten)]
        paging: Paging,
    },
    /// The tenant's price table.
    Prices,
    /// Set the tenant's price table from a file (YAML or JSON, the API's fields): every
    /// environment is priced again with it.
    SetPrices {
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
    },
    /// Download an order's archive (needs the `factory.fleet.export` scope).
    Archive {
        id: String,
        /// Where to write it.
        #[arg(long)]
        to: PathBuf,
    },
}

/// An operator command.
#[derive(Debug)]
pub enum Operator {
    Login {
        server: Option<String>,
        token: Option<String>,
    },
    Runs(Runs),
    Envs(Envs),
    Proposals(Proposals),
    Specs(Specs),
    Rollouts(Rollouts),
    Quarantines(Quarantines),
    Fleet(Fleet),
}

/// Runs `command` and returns the exit code, having printed the answer (stdout) or why not
/// (stderr).
pub async fn run(remote: &Remote, command: Operator) -> i32 {
    match dispatch(remote, command).await {
        Ok(()) => 0,
        Err(failure) => {
            eprintln!("error: {failure}");
            failure.code()
        }
    }
}

const RUN_COLUMNS: &[Column] = &[
    ("ID", "/provisioningRunId"),
    ("ENVIRONMENT", "/environmentId"),
    ("KIND", "/kind"),
    ("STATE", "/state"),
    ("STARTED", "/startedAt"),
];
const ENV_COLUMNS: &[Column] = &[
    ("ENVIRONMENT", "/environmentId"),
    ("PROJECT", "/projectId"),
    ("CLASS", "/class"),
    ("TARGET", "/target/kind"),
    ("MODE", "/mode"),
    ("POOL", "/poolId"),
    ("STATE", "/state"),
    ("EXPIRES", "/expiresAt"),
];
const WORKLOAD_COLUMNS: &[Column] = &[
    ("WORKLOAD", "/name"),
    ("KIND", "/kind"),
    ("VERSION", "/version"),
    ("READY", "/replicasReady"),
    ("DESIRED", "/replicasDesired"),
    ("HEALTH", "/health"),
];
const FINDING_COLUMNS: &[Column] = &[
    ("FINDING", "/findingId"),
    ("KIND", "/kind"),
    ("RULE", "/rule"),
    ("RESOURCE", "/resource"),
    ("DETECTED", "/detectedAt"),
    ("RESOLVED", "/resolvedAt"),
    ("PROPOSAL", "/proposalId"),
];
const COST_COLUMNS: &[Column] = &[
    ("ENVIRONMENT", "/environmentId"),
    ("PRODUCT", "/productId"),
    ("CUSTOMER", "/customerTenantId"),
    ("HOURLY", "/cost/hourly"),
    ("CPU", "/cost/cpuCores"),
    ("MEMORY GB", "/cost/memoryGb"),
    ("UNPRICED", "/cost/unpriced"),
];
const PROPOSAL_COLUMNS: &[Column] = &[
    ("PROPOSAL", "/proposalId"),
    ("ENVIRONMENT", "/environmentId"),
    ("STATE", "/state"),
    ("DIRECTION", "/direction"),
    ("DESTRUCTIVE", "/destructive"),
    ("RUN", "/provisioningRunId"),
];
const SPEC_COLUMNS: &[Column] = &[
    ("ENVIRONMENT", "/environmentId"),
    ("VERSION", "/version"),
    ("KIND", "/kind"),
    ("PROGRAM", "/programRef"),
    ("AT", "/programVersion"),
    ("DECLARED", "/declaredAt"),
];
const ROLLOUT_COLUMNS: &[Column] = &[
    ("ROLLOUT", "/rolloutId"),
    ("STATE", "/state"),
    ("BY", "/requestedBy"),
    ("CREATED", "/createdAt"),
];
const QUARANTINE_COLUMNS: &[Column] = &[
    ("QUARANTINE", "/quarantineId"),
    ("WORKLOAD", "/workload"),
    ("VERSION", "/version"),
    ("STATE", "/state"),
    ("SOURCE", "/source"),
    ("REASON", "/reason"),
];
const ORDER_COLUMNS: &[Column] = &[
    ("ORDER", "/orderId"),
    ("ENVIRONMENT", "/environmentId"),
    ("STATE", "/state"),
    ("BY", "/requestedBy"),
    ("ARCHIVE", "/archiveSha256"),
    ("RUN", "/provisioningRunId"),
];
const INSTANCE_COLUMNS: &[Column] = &[
    ("ENVIRONMENT", "/environmentId"),
    ("PRODUCT", "/productId"),
    ("CLASS", "/class"),
    ("HEALTH", "/health"),
    ("STALE", "/stale"),
    ("OPEN DRIFT", "/openDrift"),
];

/// Prints `value` as the format asks; a table of `columns` for a page.
fn print_page(format: Format, page: &Value, columns: &[Column]) {
    print!("{}", render(format, page, |p| list(p, columns)));
}

fn print_one(format: Format, value: &Value) {
    print!("{}", render(format, value, fields));
}

async fn dispatch(remote: &Remote, command: Operator) -> Outcome {
    let format = remote.output;
    if let Operator::Login { server, token } = command {
        return login(remote, server, token).await;
    }
    let api = Client::new(remote)?;
    match command {
        Operator::Login { .. } => unreachable!("handled above"),
        Operator::Runs(c) => runs(&api, format, c).await,
        Operator::Envs(c) => envs(&api, format, c).await,
        Operator::Proposals(c) => proposals(&api, format, c).await,
        Operator::Specs(c) => specs(&api, format, c).await,
        Operator::Rollouts(c) => rollouts(&api, format, c).await,
        Operator::Quarantines(c) => quarantines(&api, format, c).await,
        Operator::Fleet(c) => fleet(&api, format, c).await,
    }
}

/// Saves the server and token after checking the API accepts the token.
async fn login(remote: &Remote, server: Option<String>, token: Option<String>) -> Outcome {
    let token = match token {
        Some(t) => t,
        None => {
            eprint!("token: ");
            let _ = std::io::stderr().flush();
            let mut line = String::new();
            std::io::stdin()
                .lock()
                .read_line(&mut line)
                .map_err(|e| Failure::Usage(format!("reading the token: {e}")))?;
            line.trim().to_owned()
        }
    };
    if token.is_empty() {
        return Err(Failure::Usage("no token given".into()));
    }
    let server = server
        .or_else(|| remote.server.clone())
        .unwrap_or_else(|| client::DEFAULT_SERVER.to_owned());
    let saved = login::Saved { server, token };
    // Any answer but 401 means the API took the token (a 403 only says what it may not do).
    let api = Client::with_token(&saved.server, &saved.token);
    match api.get("/factory/environments?limit=1").await {
        Ok(_) | Err(Failure::Refused(_)) => {}
        Err(e) => return Err(e),
    }
    let path = saved.save().map_err(Failure::Usage)?;
    eprintln!("logged in to {}; saved in {}", saved.server, path.display());
    Ok(())
}

async fn runs(api: &Client, format: Format, command: Runs) -> Outcome {
    const RUNS: &str = "/factory/provisioning/runs";
    match command {
        Runs::List {
            environment,
            kind,
            state,
            paging,
        } => {
            let mut params = vec![
                ("environmentId", environment),
                ("kind", kind),
                ("state", state),
            ];
            params.extend(paging.params());
            print_page(
                format,
                &api.get(&with_query(RUNS, &params)).await?,
                RUN_COLUMNS,
            );
        }
        Runs::Get { id } => {
            let run = api.get(&format!("{RUNS}/{}", escape(&id))).await?;
            print!("{}", render(format, &run, run_page));
        }
        Runs::Plan {
            environment,
            kind,
            version,
            override_quarantine,
        } => {
            let mut body = json!({ "environmentId": environment, "kind": kind });
            if let Some(v) = version {
                body["specificationVersion"] = json!(v);
            }
            if let Some(reason) = override_quarantine {
                body["quarantineOverride"] = json!({ "reason": reason });
            }
            print_one(format, &api.post(RUNS, body).await?);
        }
        Runs::Approve { id, reason, yes } => {
            let run = api.get(&format!("{RUNS}/{}", escape(&id))).await?;
            let hash = run["planReceipt"]["inputsHash"]
                .as_str()
                .ok_or_else(|| {
                    Failure::Refused(format!(
                        "run {id} has no plan to approve (it is {})",
                        output::cell(run.get("state"))
                    ))
                })?
                .to_owned();
            eprint!("{}", plan_text(&run));
            if !yes && !confirm(&format!("Approve plan {hash} of run {id}?"))? {
                return Err(Failure::Refused("not approved".into()));
            }
            let body = json!({ "decision": "approve", "reason": reason, "inputsHash": hash });
            let path = format!("{RUNS}/{}/approval", escape(&id));
            print_one(format, &api.post(&path, body).await?);
        }
        Runs::Reject { id, reason } => {
            let run = api.get(&format!("{RUNS}/{}", escape(&id))).await?;
            let hash = output::cell(run.pointer("/planReceipt/inputsHash"));
            let body = json!({ "decision": "reject", "reason": reason, "inputsHash": hash });
            let path = format!("{RUNS}/{}/approval", escape(&id));
            print_one(format, &api.post(&path, body).await?);
        }
        Runs::Cancel { id, reason } => {
            let path = format!("{RUNS}/{}/cancel", escape(&id));
            print_one(format, &api.post(&path, json!({ "reason": reason })).await?);
        }
        Runs::Logs { id, phase, follow } => logs(api, &id, phase, follow).await?,
    }
    Ok(())
}

/// Prints the logs a page at a time; with `follow`, what they gain as the run moves, until it
/// ends.
async fn logs(api: &Client, id: &str, phase: Option<String>, follow: bool) -> Outcome {
    let run_path = format!("/factory/provisioning/runs/{}", escape(id));
    let mut printed: u64 = 0;
    loop {
        // The state first: logs read after it are at least as new, so nothing written
        // before the run ended is missed.
        let ended = !follow
            || api.get(&run_path).await?["state"]
                .as_str()
                .and_then(|s| s.parse::<ProvisioningState>().ok())
                .is_some_and(ProvisioningState::is_terminal);
        // Every page from where the last one ended; an empty page is the end so far.
        loop {
            let page_path = with_query(
                &format!("{run_path}/logs"),
                &[
                    ("phase", phase.clone()),
                    ("offset", Some(printed.to_string())),
                ],
            );
            let page = match api.bytes(&page_path).await {
                Ok(page) => page,
                // No log kept yet (the run has not planned): nothing to print so far.
                Err(Failure::NotFound(_)) if follow => Vec::new(),
                Err(e) => return Err(e),
            };
            if page.is_empty() {
                break;
            }
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(&page).and_then(|()| out.flush());
            printed += page.len() as u64;
        }
        if ended {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// A run for people: its fields, then its plan as a diff.
fn run_page(run: &Value) -> String {
    let mut out = fields(run);
    if run["planReceipt"].is_object() {
        out.push('\n');
        out.push_str(&plan_text(run));
    }
    out
}

/// The plan as a diff: `+` adds, `~` changes (with the fields), `-` deletes.
fn plan_text(run: &Value) -> String {
    // The receipt carries `adds`, `changes` and `deletes` beside its hash.
    let plan = &run["planReceipt"];
    let changes = plan;
    let mut out = format!(
        "plan {} of program {}\n",
        output::cell(plan.get("inputsHash")),
        output::cell(plan.get("programVersion"))
    );
    let none = Vec::new();
    for (sign, key) in [("+", "adds"), ("~", "changes"), ("-", "deletes")] {
        for change in changes[key].as_array().unwrap_or(&none) {
            let fields = output::cell(change.get("fields"));
            let fields = if key == "changes" {
                format!(" ({fields})")
            } else {
                String::new()
            };
            out.push_str(&format!(
                "  {sign} {} {}{fields}\n",
                output::cell(change.get("kind")),
                output::cell(change.get("name"))
            ));
        }
    }
    let count = |k: &str| changes[k].as_array().map_or(0, Vec::len);
    out.push_str(&format!(
        "  {} to add, {} to change, {} to delete\n",
        count("adds"),
        count("changes"),
        count("deletes")
    ));
    if let Some(cost) = plan.get("cost").filter(|c| c.is_object()) {
        let cell = |k: &str| output::cell(cost.get(k));
        let percent = match cost.get("deltaPercent") {
            Some(p) if p.is_number() => format!(" ({p} %)"),
            _ => String::new(),
        };
        out.push_str(&format!(
            "  cost an hour: {} -> {} {}{percent}\n",
            cell("beforeHourly"),
            cell("afterHourly"),
            cell("currency")
        ));
    }
    for v in plan["posture"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  introduces posture {} on {}: {}\n",
            output::cell(v.get("rule")),
            output::cell(v.get("resource")),
            output::cell(v.get("detail"))
        ));
    }
    out
}

/// Asks on the terminal (stderr, so stdout stays the answer); anything but `y` is no.
fn confirm(question: &str) -> Outcome<bool> {
    eprint!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| Failure::Usage(format!("reading the answer: {e}")))?;
    Ok(matches!(line.trim(), "y" | "Y" | "yes"))
}

async fn envs(api: &Client, format: Format, command: Envs) -> Outcome {
    let one = |id: &str| format!("/factory/environments/{}", escape(id));
    match command {
        Envs::List { paging } => print_page(
            format,
            &api.get(&with_query("/factory/environments", &paging.params()))
                .await?,
            ENV_COLUMNS,
        ),
        Envs::Get { id } => print_one(format, &api.get(&one(&id)).await?),
        Envs::Observe { id } => print_one(
            format,
            &api.post(&format!("{}/observe", one(&id)), json!({}))
                .await?,
        ),
        Envs::Inventory { id } => {
            let inventory = api.get(&format!("{}/inventory", one(&id))).await?;
            print!(
                "{}",
                render(format, &inventory, |v| {
                    let head = format!(
                        "observed {} ({})\n",
                        output::cell(v.get("observedAt")),
                        if v["stale"] == json!(true) {
                            "stale"
                        } else {
                            "fresh"
                        }
                    );
                    let workloads = json!({ "items": v["workloads"] });
                    head + &list(&workloads, WORKLOAD_COLUMNS)
                })
            );
        }
        Envs::Drift {
            id,
            state,
            kind,
            paging,
        } => {
            let mut params = vec![("state", state), ("kind", kind)];
            params.extend(paging.params());
            let path = with_query(&format!("{}/drift", one(&id)), &params);
            print_page(format, &api.get(&path).await?, FINDING_COLUMNS);
        }
        Envs::Extend { id, ttl, until } => {
            let body = match ttl {
                Some(ttl) => json!({ "ttl": ttl }),
                None => json!({ "expiresAt": until }),
            };
            print_one(
                format,
                &api.post(&format!("{}/extend", one(&id)), body).await?,
            );
        }
        Envs::Decommission { id, reason } => print_one(
            format,
            &api.post(
                &format!("{}/decommission", one(&id)),
                json!({ "reason": reason }),
            )
            .await?,
        ),
    }
    Ok(())
}

async fn proposals(api: &Client, format: Format, command: Proposals) -> Outcome {
    const PROPOSALS: &str = "/factory/reconciliation/proposals";
    let decide = |id: &str, decision: &str, reason: String| {
        let path = format!("{PROPOSALS}/{}/decide", escape(id));
        (path, json!({ "decision": decision, "reason": reason }))
    };
    match command {
        Proposals::List {
            environment,
            state,
            paging,
        } => {
            let mut params = vec![("environmentId", environment), ("state", state)];
            params.extend(paging.params());
            let page = api.get(&with_query(PROPOSALS, &params)).await?;
            print_page(format, &page, PROPOSAL_COLUMNS);
        }
        Proposals::Accept { id, reason } => {
            let (path, body) = decide(&id, "accept", reason);
            print_one(format, &api.post(&path, body).await?);
        }
        Proposals::Reject { id, reason } => {
            let (path, body) = decide(&id, "reject", reason);
            print_one(format, &api.post(&path, body).await?);
        }
        Proposals::Adopt { id } => {
            let path = format!("{PROPOSALS}/{}/adoption", escape(&id));
            print_one(format, &api.post(&path, json!({})).await?);
        }
        Proposals::Adoption { id } => {
            let path = format!("{PROPOSALS}/{}/adoption", escape(&id));
            print_one(format, &api.get(&path).await?);
        }
    }
    Ok(())
}

/// A YAML or JSON file as the API's JSON (JSON is YAML).
fn read_document(file: &PathBuf) -> Outcome<Value> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| Failure::Usage(format!("{}: {e}", file.display())))?;
    yaml_serde::from_str(&text).map_err(|e| Failure::Usage(format!("{}: {e}", file.display())))
}

async fn specs(api: &Client, format: Format, command: Specs) -> Outcome {
    const SPECS: &str = "/factory/provisioning/specifications";
    match command {
        Specs::Declare { file } => {
            let spec = read_document(&file)?;
            print_one(format, &api.post(SPECS, spec).await?);
        }
        Specs::List {
            environment,
            paging,
        } => {
            let mut params = vec![("environmentId", environment)];
            params.extend(paging.params());
            print_page(
                format,
                &api.get(&with_query(SPECS, &params)).await?,
                SPEC_COLUMNS,
            );
        }
    }
    Ok(())
}

async fn rollouts(api: &Client, format: Format, command: Rollouts) -> Outcome {
    const ROLLOUTS: &str = "/fleet/rollouts";
    let one = |id: &str| format!("{ROLLOUTS}/{}", escape(id));
    match command {
        Rollouts::List { paging } => {
            let page = api.get(&with_query(ROLLOUTS, &paging.params())).await?;
            print_page(format, &page, ROLLOUT_COLUMNS);
        }
        Rollouts::Get { id } => print_one(format, &api.get(&one(&id)).await?),
        Rollouts::Start { file } => {
            let rollout = read_document(&file)?;
            print_one(format, &api.post(ROLLOUTS, rollout).await?);
        }
        Rollouts::Resume { id } => print_one(
            format,
            &api.post(&format!("{}/resume", one(&id)), json!({})).await?,
        ),
        Rollouts::Abort { id } => print_one(
            format,
            &api.post(&format!("{}/abort", one(&id)), json!({})).await?,
        ),
        Rollouts::Rollback { id } => print_one(
            format,
            &api.post(&format!("{}/rollback", one(&id)), json!({}))
                .await?,
        ),
    }
    Ok(())
}

async fn fleet(api: &Client, format: Format, command: Fleet) -> Outcome {
    const ORDERS: &str = "/fleet/offboarding-orders";
    match command {
        Fleet::Summary => print_one(format, &api.get("/fleet/meta/summary").await?),
        Fleet::Instances { paging } => print_page(
            format,
            &api.get(&with_query("/fleet/instances", &paging.params()))
                .await?,
            INSTANCE_COLUMNS,
        ),
        Fleet::Costs {
            product,
            customer,
            paging,
        } => {
            let mut params = vec![("productId", product), ("customerTenantId", customer)];
            params.extend(paging.params());
            let costs = api.get(&with_query("/fleet/costs", &params)).await?;
            if format == Format::Table {
                // The totals first: what the selection costs, or why there is no cost.
                let cell = |key: &str| output::cell(costs.get(key));
                match costs["priced"].as_bool() {
                    Some(true) => println!(
                        "{} {} an hour ({} instances priced, {} not)",
                        cell("hourly"),
                        cell("currency"),
                        cell("instancesPriced"),
                        cell("instancesUnpriced")
                    ),
                    _ => println!("{}", cell("reason")),
                }
            }
            print_page(format, &costs, COST_COLUMNS);
        }
        Fleet::Prices => print_one(format, &api.get("/factory/prices").await?),
        Fleet::SetPrices { file } => {
            let prices = read_document(&file)?;
            print_one(format, &api.put("/factory/prices", prices).await?);
        }
        Fleet::Offboard { id, reason } => {
            let body = json!({ "environmentId": id, "reason": reason });
            print_one(format, &api.post(ORDERS, body).await?);
        }
        Fleet::Orders { state, paging } => {
            let mut params = vec![("state", state)];
            params.extend(paging.params());
            print_page(
                format,
                &api.get(&with_query(ORDERS, &params)).await?,
                ORDER_COLUMNS,
            );
        }
        Fleet::Archive { id, to } => {
            let archive = api
                .bytes(&format!("{ORDERS}/{}/archive", escape(&id)))
                .await?;
            std::fs::write(&to, &archive)
                .map_err(|e| Failure::Usage(format!("{}: {e}", to.display())))?;
            eprintln!("wrote {} bytes to {}", archive.len(), to.display());
        }
    }
    Ok(())
}

async fn quarantines(api: &Client, format: Format, command: Quarantines) -> Outcome {
    const QUARANTINES: &str = "/factory/quarantines";
    match command {
        Quarantines::List {
            state,
            workload,
            paging,
        } => {
            let mut params = vec![("state", state), ("workload", workload)];
            params.extend(paging.params());
            let page = api.get(&with_query(QUARANTINES, &params)).await?;
            print_page(format, &page, QUARANTINE_COLUMNS);
        }
        Quarantines::Place {
            workload,
            version,
            reason,
        } => {
            let body = json!({ "workload": workload, "version": version, "reason": reason });
            print_one(format, &api.post(QUARANTINES, body).await?);
        }
        Quarantines::Lift { id, reason } => {
            let path = format!("{QUARANTINES}/{}/lift", escape(&id));
            print_one(format, &api.post(&path, json!({ "reason": reason })).await?);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_reads_as_a_diff_with_the_changed_fields() {
        let run = json!({"planReceipt": {"inputsHash": "h1", "programVersion": "abc",
            "adds": [{"name": "web", "kind": "Deployment"}],
            "changes": [{"name": "api", "kind": "Deployment", "fields": ["version", "replicas"]}],
            "deletes": [{"name": "old", "kind": "Service"}]
        }});
        assert_eq!(
            plan_text(&run),
            "plan h1 of program abc\n  + Deployment web\n  ~ Deployment api (version,replicas)\n  \
             - Service old\n  1 to add, 1 to change, 1 to delete\n"
        );
        let priced = json!({"planReceipt": {"inputsHash": "h1", "programVersion": "abc",
            "adds": [], "changes": [], "deletes": [],
            "cost": {"currency": "EUR", "beforeHourly": 0.5, "afterHourly": 1.0,
                     "deltaHourly": 0.5, "deltaPercent": 100.0}}});
        assert!(
            plan_text(&priced).ends_with("  cost an hour: 0.5 -> 1.0 EUR (100.0 %)\n"),
            "{}",
            plan_text(&priced)
        );
        let risky = json!({"planReceipt": {"inputsHash": "h1", "programVersion": "abc",
            "adds": [], "changes": [], "deletes": [],
            "posture": [{"rule": "privileged-container", "resource": "deployment/api",
                         "detail": "container `api` is privileged"}]}});
        assert!(
            plan_text(&risky).ends_with(
                "  introduces posture privileged-container on deployment/api: container `api` \
                 is privileged\n"
            ),
            "{}",
            plan_text(&risky)
        );
    }
}
