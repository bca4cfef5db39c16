//! What a set endpoint's listening clients hear (issue 33): when a server whose tools the set
//! lists changes what it exposes (a refresh, an approval, its own list_changed, a change made
//! on another instance), the set's clients are told its tool, prompt or resource list changed,
//! so they list again instead of polling; and a client subscribed to a resource hears that it
//! was updated.

use super::{ToolSet, ToolSets};
use crate::auth::Principal;
use crate::catalog::ToolSource;
use crate::upstream::{ListChanged, ResourceUpdated};

/// Which of a set's lists a change touches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Heard {
    pub tools: bool,
    pub prompts: bool,
    pub resources: bool,
}

impl Heard {
    /// Everything (a listener fell behind and cannot know what it missed).
    pub const ALL: Heard = Heard {
        tools: true,
        prompts: true,
        resources: true,
    };

    pub fn any(&self) -> bool {
        self.tools || self.prompts || self.resources
    }
}

impl ToolSets {
    /// Hears every change of every project's servers; `heard` tells what of it is a set's.
    pub fn notices(&self) -> tokio::sync::broadcast::Receiver<ListChanged> {
        self.upstreams.notices()
    }

    /// Hears every resource update servers send; a subscription matches its own
    /// (`Subscription::hears`).
    pub fn resource_updates(&self) -> tokio::sync::broadcast::Receiver<ResourceUpdated> {
        self.upstreams.updates()
    }

    /// What `change` means for the set as `who` uses it: nothing unless it is a server of the
    /// set's project whose tools the set lists (or one no longer in the catalog: a deleted
    /// server may have been one of them); prompts and resources only when the set publishes
    /// them.
    pub fn heard(&self, who: &Principal, set: &ToolSet, change: &ListChanged) -> Heard {
        if change.project_id != who.project_id {
            return Heard::default();
        }
        let snapshot = self.engine.snapshot(who);
        let of_server = |t: &crate::catalog::Tool| matches!(&t.spec.source, ToolSource::Mcp(id) if *id == change.server_id);
        let listed = set
            .tools
            .iter()
            .filter_map(|e| snapshot.get(&e.tool))
            .any(|t| of_server(t));
        let gone = !snapshot.tools().iter().any(|t| of_server(t));
        if !(listed || gone) {
            return Heard::default();
        }
        Heard {
            tools: change.tools,
            prompts: change.prompts && set.prompts_and_resources,
            resources: change.resources && set.prompts_and_resources,
        }
    }
}
