//! An admin's project-wide name and description for a tool of an MCP server (issue 33): agents,
//! search, schemas and tool sets see them; the upstream's own text stays what the review
//! fingerprint covers and compares. A rename moves the tool's claim on its catalog name
//! (`mcp_tool_names`) to the new name, so no other tool can take either meanwhile.

use super::{catalog_name, other_source, owners_of, taken_by, upstream_name, ToolView, Upstreams};
use crate::auth::{Operation, Principal};
use crate::catalog::{check_description, name_char, ToolName};
use crate::store::{
    self,
    mcp_servers::{NameOwner, ToolState},
};
use crate::{Error, Result};

/// What an admin changes of a tool's text: for each, `None` leaves it, `Some(None)` goes back
/// to the upstream's own, `Some(Some(_))` sets it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TextOverrides {
    pub name: Option<Option<String>>,
    pub description: Option<Option<String>>,
}

impl Upstreams {
    /// Renames and/or re-describes one tool of a server, project-wide.
    pub async fn set_text(
        &self,
        admin: &Principal,
        id: &str,
        tool: &str,
        text: TextOverrides,
    ) -> Result<ToolView> {
        admin.require(Operation::McpServersReview)?;
        let row = self.server(admin, id).await?;
        let existing = store::mcp_servers::list_tools(self.db.pool(), &row.id).await?;
        let upstream = upstream_name(&row, &existing, tool).ok_or(Error::NotFound)?;
        let mut t = existing
            .iter()
            .find(|t| t.name == upstream)
            .cloned()
            .ok_or(Error::NotFound)?;
        if let Some(description) = text.description {
            let description = description.map(|d| d.trim().to_owned());
            if let Some(d) = &description {
                check_description("description", d)?;
            }
            t.description_override = description.filter(|d| !d.is_empty());
        }
        let renamed = text.name.is_some();
        if let Some(name) = text.name {
            let name = name.map(|n| n.trim().to_owned());
            if name
                .as_deref()
                .is_some_and(|n| n.is_empty() || !n.chars().all(name_char))
            {
                return Err(Error::invalid(
                    "name must be letters, digits, '_', '.' and '-' (the server's prefix goes before it); null goes back to the upstream's",
                ));
            }
            t.name_override = name.filter(|n| *n != t.name);
        }
        let now = self.now();
        t.updated_at = now;
        let new_name = catalog_name(&row, &t);
        let mut tx = self.db.begin_write().await?;
        if renamed {
            ToolName::parse(&new_name)?;
            if let Some(other) = existing
                .iter()
                .find(|o| o.name != t.name && catalog_name(&row, o) == new_name)
            {
                return Err(Error::Conflict(format!(
                    "{new_name} is the name of this server's tool {}",
                    other.name
                )));
            }
            let owners =
                owners_of(store::mcp_servers::name_owners(&mut *tx, &row.project_id).await?);
            if taken_by(&owners, &row, &t).is_some() {
                return Err(Error::Conflict(format!(
                    "{new_name} belongs to a tool of another MCP server"
                )));
            }
            if let Some(source) = other_source(&self.catalog.snapshot(&row.project_id), &new_name) {
                return Err(Error::Conflict(format!(
                    "{new_name} is the name of a tool from {source}"
                )));
            }
            store::mcp_servers::release_names(&mut *tx, &row.id, &t.name).await?;
            // A held tool claims no name (as at refresh); it claims one when it is approved.
            if t.status != ToolState::PendingReview {
                let claim = NameOwner {
                    name: new_name.clone(),
                    server_id: row.id.clone(),
                    tool: t.name.clone(),
                };
                if !store::mcp_servers::claim_name(&mut *tx, &row.project_id, &claim, now).await? {
                    return Err(Error::Conflict(format!(
                        "{new_name} was taken by another tool a moment ago"
                    )));
                }
            }
        }
        store::mcp_servers::upsert_tool(&mut *tx, &t).await?;
        store::mcp_servers::touch(&mut *tx, &row.id, now).await?;
        tx.commit().await?;
        tracing::info!(server = %row.id, tool = %t.name, name = ?t.name_override, described = t.description_override.is_some(), by = %admin.user_id, "MCP tool's text overridden");
        self.reload_project(&admin.project_id).await?;
        self.tools(admin, id)
            .await?
            .into_iter()
            .find(|v| v.name == t.name)
            .ok_or(Error::NotFound)
    }
}
