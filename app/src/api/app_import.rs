//! Server functions of the Apps page's OpenAPI import: preview what a document (pasted, uploaded
//! or fetched from its URL) becomes, then create the app from the operations picked.

use leptos::prelude::*;

use crate::AppError;
pub use workbench_model::apps::{ImportOperation, ImportPreviewView};

#[cfg(feature = "ssr")]
use crate::ssr;

#[cfg(feature = "ssr")]
async fn run_import(
    name: String,
    document: String,
    base_url: String,
    tags: String,
    operation_ids: Option<String>,
) -> Result<workbench_core::plugins::ImportPreview, AppError> {
    use workbench_core::integrations::openapi::Filter;
    use workbench_core::plugins::{DocumentSource, ImportRequest};
    let p = ssr::principal().await?;
    let text = document.trim();
    let source =
        if !text.contains('\n') && (text.starts_with("https://") || text.starts_with("http://")) {
            DocumentSource::Url(text.to_owned())
        } else {
            DocumentSource::Text(document)
        };
    let list = |s: &str| {
        s.split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let filter = Filter {
        tags: list(&tags),
        operation_ids: operation_ids.as_deref().map(list).unwrap_or_default(),
        methods: Vec::new(),
    };
    let base_url = Some(base_url.trim().to_owned()).filter(|b| !b.is_empty());
    let req = ImportRequest {
        name: name.trim().to_owned(),
        display_name: None,
        base_url,
        auth: None,
        filter,
        source,
    };
    Ok(ssr::wb()?.apps().import(&p, req).await?)
}

/// What the document becomes, with every operation listed.
#[server(endpoint = "preview_app_import")]
pub async fn preview_app_import(
    name: String,
    document: String,
    base_url: String,
    tags: String,
) -> Result<ImportPreviewView, AppError> {
    let preview = run_import(name, document, base_url, tags, None).await?;
    let side_effects = |tool: &Option<String>| {
        let def = preview.definition.as_ref()?;
        let t = def.tools.iter().find(|t| Some(&t.name) == tool.as_ref())?;
        Some(t.side_effects)
    };
    Ok(ImportPreviewView {
        display_name: preview.definition.as_ref().map(|d| d.display_name.clone()),
        base_url: preview.definition.as_ref().map(|d| d.base_url.clone()),
        operations: preview
            .operations
            .iter()
            .map(|o| ImportOperation {
                operation_id: o.operation_id.clone(),
                method: o.method.clone(),
                path: o.path.clone(),
                summary: o.summary.clone(),
                side_effects: side_effects(&o.tool),
                tool: o.tool.clone(),
                selected: o.selected,
                skipped: o.skipped.clone(),
            })
            .collect(),
        warnings: preview.warnings.clone(),
        problem: preview.problem.clone(),
    })
}

/// Creates the app from the picked operations (comma-separated operation ids).
#[server(endpoint = "create_imported_app")]
pub async fn create_imported_app(
    name: String,
    document: String,
    base_url: String,
    operation_ids: String,
) -> Result<String, AppError> {
    if operation_ids.trim().is_empty() {
        return Err(AppError::Message("pick at least one operation".into()));
    }
    let preview = run_import(name, document, base_url, String::new(), Some(operation_ids)).await?;
    if let Some(problem) = preview.problem {
        return Err(AppError::Message(problem));
    }
    let def = preview
        .definition
        .ok_or_else(|| AppError::Message("no operation became a tool".into()))?;
    let value = serde_json::to_value(&def).map_err(|e| AppError::Message(e.to_string()))?;
    let p = ssr::principal().await?;
    let app = ssr::wb()?.apps().create(&p, &value).await?;
    Ok(format!(
        "Created {} with {} tools.",
        app.display_name,
        app.tools.len()
    ))
}
