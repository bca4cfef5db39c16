//! Importing a custom app from an OpenAPI document, inline or fetched from a URL (with the
//! address rules every admin-registered destination passes: no private, loopback or metadata
//! address unless the operator allows them, each redirect checked). The answer is a preview:
//! the operations, the tools they become and why any did not; the admin creates the app from
//! it with `POST /v1/apps`.

use serde::Serialize;
use serde_json::Value;

use super::apps::{Apps, MAX_TOOLS_PER_APP};
use crate::auth::Principal;
use crate::egress::{FetchError, FetchRequest};
use crate::integrations::openapi::{self, Filter, ImportOptions, Operation, MAX_DOCUMENT_BYTES};
use crate::integrations::{AuthDef, IntegrationDef};
use crate::{Error, Result};

/// Where the document comes from.
#[derive(Debug, Clone)]
pub enum DocumentSource {
    /// JSON or YAML text.
    Text(String),
    /// A document already parsed as JSON.
    Json(Value),
    /// An http(s) URL to fetch it from.
    Url(String),
}

#[derive(Debug, Clone)]
pub struct ImportRequest {
    pub name: String,
    pub display_name: Option<String>,
    pub base_url: Option<String>,
    pub auth: Option<Value>,
    pub filter: Filter,
    pub source: DocumentSource,
}

/// What the admin reviews.
#[derive(Debug, Clone, Serialize)]
pub struct ImportPreview {
    pub object: &'static str,
    /// The app definition for `POST /v1/apps`; absent when no operation became a tool.
    pub definition: Option<IntegrationDef>,
    pub tools: usize,
    pub operations: Vec<Operation>,
    pub warnings: Vec<String>,
    /// Why the definition cannot be created as it stands (too many tools, none at all).
    pub problem: Option<String>,
}

impl Apps {
    /// Turns an OpenAPI 3.0/3.1 document into a reviewable app definition. Nothing is stored.
    pub async fn import(&self, admin: &Principal, req: ImportRequest) -> Result<ImportPreview> {
        admin.require(crate::auth::Operation::AppsManage)?;
        IntegrationDef::check_name(&req.name)?;
        if self.name_taken(&admin.project_id, &req.name) {
            return Err(Error::Conflict(format!(
                "an integration named {} already exists",
                req.name
            )));
        }
        let auth: AuthDef = match req.auth {
            None | Some(Value::Null) => AuthDef::None,
            Some(v) => {
                serde_json::from_value(v).map_err(|e| Error::invalid(format!("auth: {e}")))?
            }
        };
        let (doc, document_url) = match req.source {
            DocumentSource::Json(v) => {
                let size = serde_json::to_vec(&v).map(|b| b.len()).unwrap_or(0);
                if size > MAX_DOCUMENT_BYTES {
                    return Err(openapi::too_large(size));
                }
                (openapi::check_document(v)?, None)
            }
            DocumentSource::Text(t) => (openapi::parse_document(&t)?, None),
            DocumentSource::Url(u) => {
                let (text, final_url) = self.fetch_document(&u).await?;
                (openapi::parse_document(&text)?, Some(final_url))
            }
        };
        let opts = ImportOptions {
            name: req.name,
            display_name: req.display_name,
            base_url: req.base_url,
            auth,
            filter: req.filter,
            document_url,
        };
        let imported = openapi::import(&doc, &opts)?;
        let tools = imported.definition.as_ref().map_or(0, |d| d.tools.len());
        let problem = match tools {
            0 => Some("no selected operation could become a tool; see each operation's reason".to_owned()),
            n if n > MAX_TOOLS_PER_APP => Some(format!("{n} operations are selected; an app has at most {MAX_TOOLS_PER_APP} tools, so narrow the selection by tag, operation id or method")),
            _ => None,
        };
        if let Some(d) = &imported.definition {
            self.check_destinations(d)?;
        }
        Ok(ImportPreview {
            object: "app_import",
            definition: imported.definition,
            tools,
            operations: imported.operations,
            warnings: imported.warnings,
            problem,
        })
    }

    async fn fetch_document(&self, raw: &str) -> Result<(String, url::Url)> {
        let req = FetchRequest {
            method: reqwest::Method::GET,
            url: raw.to_owned(),
            headers: vec![(
                "accept".into(),
                "application/json, application/yaml, text/yaml, */*".into(),
            )],
            body: None,
            secret_headers: Vec::new(),
            secret_body: false,
        };
        let res = self
            .fetcher()
            .fetch_configured(req, MAX_DOCUMENT_BYTES)
            .await
            .map_err(|e| match e {
                FetchError::TooLarge(_) => Error::invalid(format!(
                    "the document at {raw} is larger than {MAX_DOCUMENT_BYTES} bytes (5 MiB)"
                )),
                other => Error::invalid(format!("cannot fetch the document: {other}")),
            })?;
        if !(200..300).contains(&res.status) {
            return Err(Error::invalid(format!(
                "cannot fetch the document: {raw} answered {}",
                res.status
            )));
        }
        let text = String::from_utf8(res.body.to_vec())
            .map_err(|_| Error::invalid("the fetched document is not UTF-8 text"))?;
        let final_url =
            url::Url::parse(&res.final_url).map_err(|e| Error::internal(e.to_string()))?;
        Ok((text, final_url))
    }
}
