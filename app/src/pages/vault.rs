//! Vault: the project's secrets for `{{vault:NAME}}` references. Create, replace a value,
//! delete; a value is never shown again once saved.

use leptos::prelude::*;

use crate::api::{vault_page, DeleteSecret, SetSecret};
use crate::components::{
    ActionError, Loaded, Page, Table, BUTTON, BUTTON_DANGER, CARD, INPUT, LABEL,
};

#[component]
pub fn Vault() -> impl IntoView {
    let set = ServerAction::<SetSecret>::new();
    let delete = ServerAction::<DeleteSecret>::new();
    let data = reloaded_after!(vault_page(); set, delete);
    let saved = move || set.value().get().is_some_and(|r| r.is_ok());
    // Once saved, the typed value leaves the page too.
    let form = NodeRef::<leptos::html::Form>::new();
    Effect::new(move |_| {
        if saved() {
            if let Some(f) = form.get() {
                f.reset();
            }
        }
    });
    view! {
        <Page current="/vault" title="Vault"
            subtitle="Secrets agents use as {{vault:NAME}} in tool arguments. Values are encrypted at rest, scrubbed from results and never shown after saving.">
            <section class=format!("{CARD} mb-6 max-w-2xl")>
                <h2 class="mb-4 font-medium">"Add or replace a secret"</h2>
                <ActionForm action=set node_ref=form attr:class="grid grid-cols-2 gap-4" attr:autocomplete="off">
                    <div>
                        <label for="secret-name" class=LABEL>"Name"</label>
                        <input id="secret-name" name="name" type="text" required maxlength="64" pattern="[A-Za-z_][A-Za-z0-9_.\\-]*" placeholder="STRIPE_KEY" class=INPUT/>
                    </div>
                    <div>
                        <label for="secret-value" class=LABEL>"Value"</label>
                        <input id="secret-value" name="value" type="password" required minlength="6" autocomplete="new-password" class=INPUT/>
                    </div>
                    <div class="col-span-2"><button type="submit" class=BUTTON>"Save secret"</button></div>
                </ActionForm>
                {move || saved().then(|| view! { <p role="status" class="mt-3 text-sm text-emerald-700">"Saved. The value will not be shown again."</p> })}
                <ActionError value=set.value()/>
                <ActionError value=delete.value()/>
            </section>
            <Loaded data=data content=move |value| match value {
                secrets if secrets.is_empty() => view! {
                    <section class=CARD><p class="text-sm text-slate-600">"No secrets yet."</p></section>
                }.into_any(),
                secrets => {
                    let rows = secrets.into_iter().map(|s| view! {
                        <tr class="border-t border-slate-100" data-testid="secret-row">
                            <td class="py-2 pr-4 font-mono text-sm font-medium">{s.name.clone()}</td>
                            <td class="py-2 pr-4 font-mono text-xs text-slate-500">{s.id.clone()}</td>
                            <td class="py-2 pr-4 text-slate-600">{s.created.clone()}</td>
                            <td class="py-2 pr-4 text-slate-600">{s.updated.clone()}</td>
                            <td class="py-2 text-right">
                                <ActionForm action=delete>
                                    <input type="hidden" name="name" value=s.name.clone()/>
                                    <button type="submit" class=BUTTON_DANGER aria-label=format!("Delete {}", s.name)>"Delete"</button>
                                </ActionForm>
                            </td>
                        </tr>
                    }).collect_view();
                    view! {
                        <section class=CARD>
                            <Table headers=&["Name", "Id", "Created", "Updated", ""]>{rows}</Table>
                        </section>
                    }.into_any()
                }
            }/>
        </Page>
    }
}
