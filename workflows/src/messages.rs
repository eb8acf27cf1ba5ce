//! What one workflow sends another across module lines, declared by name: the sender needs
//! no import of the receiver, so no two workflow modules import each other (a run hands new
//! proposals over, and a proposal starts a run; a lock grants to a run, and a run takes a
//! lock). Each receiver's tests check that its own names match these.

use crate::contracts::ProposalInput;
use runtime_cloud_models::drift::ProposalState;
use temporalio_common::{SignalDefinition, UntypedWorkflow, WorkflowDefinition};

/// The ReconciliationProposal workflow, as the workflows that start one see it.
pub struct StartProposal;

impl WorkflowDefinition for StartProposal {
    type Input = ProposalInput;
    type Output = ProposalState;
    fn name(&self) -> &str {
        "ReconciliationProposal"
    }
}

/// Signal `supersede` of a proposal: a newer proposal (or a clean observation) replaced it.
pub struct Supersede;

impl SignalDefinition for Supersede {
    type Workflow = StartProposal;
    type Input = ();
    fn name(&self) -> &str {
        "supersede"
    }
}

/// Signal `granted`: the release of a semaphore (an environment's lock, a project's capacity)
/// tells a waiting workflow that it now holds a slot; the payload is the semaphore's id.
/// Every workflow that takes one ([`crate::semaphore::ask`]) has it.
pub struct Granted;

impl SignalDefinition for Granted {
    type Workflow = UntypedWorkflow;
    type Input = String;
    fn name(&self) -> &str {
        "granted"
    }
}
