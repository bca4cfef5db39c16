//! The Apps page's OpenAPI import: paste or upload a document (or give its URL), preview the
//! operations and the tools they become, pick some and create the app. Picking operations
//! needs JavaScript; the preview itself is a plain form.

use std::collections::BTreeSet;

use leptos::prelude::*;

use crate::api::{CreateImportedApp, ImportPreviewView, PreviewAppImport};
use crate::components::{ActionError, BUTTON, CARD, INPUT, LABEL};

/// Reads the chosen file into the document box.
fn read_file(ev: leptos::ev::Event, document: RwSignal<String>) {
    #[cfg(feature = "hydrate")]
    {
        use leptos::wasm_bindgen::JsCast;
        let Some(input) = ev
            .target()
            .and_then(|t| t.dyn_into::<leptos::web_sys::HtmlInputElement>().ok())
        else {
            return;
        };
        let Some(file) = input.files().and_then(|f| f.get(0)) else {
            return;
        };
        let promise = file.text();
        leptos::task::spawn_local(async move {
            if let Ok(text) =
                leptos::__reexports::wasm_bindgen_futures::JsFuture::from(promise).await
            {
                document.set(text.as_string().unwrap_or_default());
            }
        });
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = (ev, document);
}

/// The import's actions and form state. It lives in the Apps page, above the Suspense that
/// reloads the app list, so creating an app (which reloads the list) keeps what was shown.
#[derive(Clone, Copy)]
pub struct ImportState {
    preview: ServerAction<PreviewAppImport>,
    pub create: ServerAction<CreateImportedApp>,
    name: RwSignal<String>,
    document: RwSignal<String>,
    base_url: RwSignal<String>,
    chosen: RwSignal<BTreeSet<String>>,
}

impl ImportState {
    pub fn new() -> ImportState {
        let s = ImportState {
            preview: ServerAction::new(),
            create: ServerAction::new(),
            name: RwSignal::new(String::new()),
            document: RwSignal::new(String::new()),
            base_url: RwSignal::new(String::new()),
            chosen: RwSignal::new(BTreeSet::new()),
        };
        // A new preview picks every operation that became a tool.
        Effect::new(move |_| {
            if let Some(Ok(p)) = s.preview.value().get() {
                s.chosen.set(
                    p.operations
                        .iter()
                        .filter(|o| o.tool.is_some())
                        .filter_map(|o| o.operation_id.clone())
                        .collect(),
                );
            }
        });
        s
    }
}

#[component]
pub fn AppImport(state: ImportState) -> impl IntoView {
    let ImportState {
        preview,
        create,
        name,
        document,
        base_url,
        chosen,
    } = state;
    let table = move |p: ImportPreviewView| {
        let rows = p
            .operations
            .into_iter()
            .map(|o| {
                let id = o.operation_id.clone().unwrap_or_default();
                let importable = o.tool.is_some() && !id.is_empty();
                let checked = {
                    let id = id.clone();
                    move || chosen.with(|c| c.contains(&id))
                };
                let toggle = {
                    let id = id.clone();
                    move |_| {
                        chosen.update(|c| {
                            if !c.remove(&id) {
                                c.insert(id.clone());
                            }
                        })
                    }
                };
                view! {
                    <tr class="border-t border-slate-100" data-testid="import-operation">
                        <td class="py-1 pr-2">
                            <input type="checkbox" aria-label=format!("Import {id}") disabled=!importable prop:checked=checked on:change=toggle/>
                        </td>
                        <td class="py-1 pr-2 font-mono text-xs">{o.method.clone()}</td>
                        <td class="py-1 pr-2 font-mono text-xs">{o.path.clone()}</td>
                        <td class="py-1 pr-2 font-mono text-xs" data-testid="import-tool">{o.tool.clone().unwrap_or_default()}</td>
                        <td class="py-1 pr-2 text-xs">{o.side_effects.map(|s| s.as_str()).unwrap_or_default()}</td>
                        <td class="py-1 text-xs text-slate-600">
                            {o.summary.clone().unwrap_or_default()}
                            {o.skipped.clone().map(|s| view! { <span class="block text-amber-700" data-testid="import-skipped">{format!("Not imported: {s}")}</span> })}
                            {(!o.selected && o.skipped.is_none()).then(|| view! { <span class="block text-slate-400">"Outside the tag filter"</span> })}
                        </td>
                    </tr>
                }
            })
            .collect_view();
        view! {
            <div class="mt-4 space-y-3" data-testid="import-preview">
                <p class="text-sm text-slate-700">{format!("{} · {}", p.display_name.unwrap_or_default(), p.base_url.unwrap_or_default())}</p>
                <table class="w-full text-left text-sm">
                    <thead><tr class="text-xs text-slate-500"><th></th><th>"Method"</th><th>"Path"</th><th>"Tool"</th><th>"Side effects"</th><th>"Summary"</th></tr></thead>
                    <tbody>{rows}</tbody>
                </table>
                {(!p.warnings.is_empty()).then(|| view! { <ul class="text-xs text-amber-700">{p.warnings.into_iter().map(|w| view! { <li>{w}</li> }).collect_view()}</ul> })}
                {p.problem.map(|m| view! { <p class="text-sm text-amber-700" role="alert">{m}</p> })}
                <ActionForm action=create attr:class="flex items-center gap-3">
                    <input type="hidden" name="name" prop:value=move || name.get()/>
                    <input type="hidden" name="document" prop:value=move || document.get()/>
                    <input type="hidden" name="base_url" prop:value=move || base_url.get()/>
                    <input type="hidden" name="operation_ids" prop:value=move || chosen.with(|c| c.iter().cloned().collect::<Vec<_>>().join(","))/>
                    <button type="submit" class=BUTTON disabled=move || chosen.with(BTreeSet::is_empty)>
                        {move || format!("Create app with {} tools", chosen.with(BTreeSet::len))}
                    </button>
                </ActionForm>
            </div>
        }
    };
    view! {
        <section class=format!("{CARD} mb-6 max-w-3xl")>
            <h2 class="mb-3 text-base font-semibold">"Import from OpenAPI"</h2>
            <ActionForm action=preview attr:class="space-y-3">
                <div>
                    <label for="import-name" class=LABEL>"App name"</label>
                    <input id="import-name" name="name" required class=INPUT placeholder="inventory" prop:value=move || name.get() on:input:target=move |ev| name.set(ev.target().value())/>
                </div>
                <div>
                    <label for="import-document" class=LABEL>"OpenAPI 3.0 or 3.1 document (JSON or YAML), or its URL"</label>
                    <textarea id="import-document" name="document" rows="8" required class="block w-full rounded-md border border-slate-300 p-3 font-mono text-xs" prop:value=move || document.get() on:input:target=move |ev| document.set(ev.target().value())></textarea>
                    <label class="mt-2 block text-xs text-slate-600">"Or upload a file: "<input type="file" accept=".json,.yaml,.yml,application/json,application/yaml" aria-label="Upload an OpenAPI document" on:change=move |ev| read_file(ev, document)/></label>
                </div>
                <div class="grid grid-cols-2 gap-3">
                    <div>
                        <label for="import-base" class=LABEL>"Base URL (optional)"</label>
                        <input id="import-base" name="base_url" class=INPUT placeholder="the document's first server" prop:value=move || base_url.get() on:input:target=move |ev| base_url.set(ev.target().value())/>
                    </div>
                    <div>
                        <label for="import-tags" class=LABEL>"Tags (optional, comma-separated)"</label>
                        <input id="import-tags" name="tags" class=INPUT/>
                    </div>
                </div>
                <button type="submit" class=BUTTON>"Preview"</button>
            </ActionForm>
            <ActionError value=preview.value()/>
            {move || preview.value().get().and_then(Result::ok).map(table)}
            <ActionError value=create.value()/>
            {move || create.value().get().and_then(Result::ok).map(|m| view! { <p class="mt-3 text-sm text-emerald-700" role="status">{m}</p> })}
        </section>
    }
}
