//! Who decides a pending tool call and what they may decide: [`Decision`] and [`Approvers`], the
//! vocabulary a tool's `approval` and a deadline (`deadline.rs`) share (a leaf).

use serde::Serialize;

/// A decision a person may make on a pending tool call.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// The tool runs with the proposed arguments.
    Approve,
    /// The tool runs with the person's arguments (checked against the tool's `args`).
    Edit,
    /// The tool does not run; the model gets an error result carrying the reason.
    Reject,
    /// The tool does not run; the person's text is its result.
    Respond,
}

impl Decision {
    /// Every decision, in the default order.
    pub const ALL: [Decision; 4] = [
        Decision::Approve,
        Decision::Edit,
        Decision::Reject,
        Decision::Respond,
    ];

    /// The name as written in definitions and on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::Edit => "edit",
            Decision::Reject => "reject",
            Decision::Respond => "respond",
        }
    }

    /// The decision named `name`.
    pub fn parse(name: &str) -> Option<Decision> {
        Decision::ALL.into_iter().find(|d| d.as_str() == name)
    }
}

/// `approval.approvers`: who may decide.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Approvers {
    /// `roles`: key roles that may decide.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<String>,
    /// `principals`: principals that may decide.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub principals: Vec<String>,
}
