//! Egress: the hosts http.fetch may reach from this project. Admins add and remove patterns;
//! private and metadata addresses stay blocked whatever is listed.

use leptos::prelude::*;

use crate::api::{egress_page, AddEgressRule, RemoveEgressRule};
use crate::components::{
    ActionError, AddCard, ListCard, Loaded, OneFieldForm, Page, BUTTON_DANGER,
};

#[component]
pub fn Egress() -> impl IntoView {
    let add = ServerAction::<AddEgressRule>::new();
    let remove = ServerAction::<RemoveEgressRule>::new();
    let data = reloaded_after!(egress_page(); add, remove);
    view! {
        <Page current="/egress" title="Egress" heading="Egress allowlist"
            subtitle="Hosts the http.fetch tool may call. Private, loopback, link-local and cloud metadata addresses are refused even when listed.">
            <Loaded data=data content=move |d| {
                let can_manage = d.can_manage;
                let empty = d.patterns.is_empty();
                let rows = d.patterns.into_iter().map(|p| view! {
                    <li class="flex items-center justify-between py-2" data-testid="egress-row">
                        <span class="font-mono text-sm">{p.clone()}</span>
                        {can_manage.then(|| view! {
                            <ActionForm action=remove>
                                <input type="hidden" name="pattern" value=p.clone()/>
                                <button type="submit" class=BUTTON_DANGER aria-label=format!("Remove {p}")>"Remove"</button>
                            </ActionForm>
                        })}
                    </li>
                }).collect_view();
                view! {
                    <AddCard show=can_manage width="max-w-xl">
                        <OneFieldForm action=add name="pattern" label="Host pattern" placeholder="api.example.com, *.example.com, host:8443" submit="Allow"/>
                        <ActionError value=add.value()/>
                        <ActionError value=remove.value()/>
                    </AddCard>
                    <ListCard empty=empty width="max-w-xl" empty_text="Nothing is allowed yet: http.fetch refuses every host.">
                        {rows}
                    </ListCard>
                }.into_any()
            }/>
        </Page>
    }
}
