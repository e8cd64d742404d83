//! Whether a thread can go on under the definitions as they are now: a thread parked (or
//! waiting) under one revision of `agents/` may be resumed under another. A change that leaves
//! what the thread needs — its agent, the person its park waits for, the acting side's prompt
//! — resumes as usual; one that removed any of them fails that thread (a step error naming what
//! is missing), never the process. A tool call in flight completes by its id, so a tool
//! removed from a prompt strands nothing.

use duet_spec::{Project, Side};

use crate::types::{Thread, ThreadStatus};

/// What `t` needs that `project` no longer has, if anything.
pub fn missing(project: &Project, t: &Thread) -> Option<String> {
    let Some(agent) = project.agents.get(&t.agent).map(|d| &d.def) else {
        return Some(format!("agent `{}` is no longer defined", t.agent));
    };
    let sides = [
        agent.side(duet_spec::SideId::A),
        agent.side(duet_spec::SideId::B),
    ];
    if t.status == ThreadStatus::AwaitingHuman && !sides.iter().any(|s| s.is_human()) {
        return Some(format!(
            "agent `{}` no longer has a human side to answer its question",
            t.agent
        ));
    }
    if let Some(side) = t.acting
        && let Side::Prompt(cfg) = agent.side(side)
        && !project.prompts.contains_key(&cfg.prompt)
    {
        return Some(format!(
            "prompt `{}` (side {} of `{}`) is no longer defined",
            cfg.prompt,
            crate::types::side_str(side),
            t.agent
        ));
    }
    None
}
