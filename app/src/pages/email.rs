//! Email: the sender domains email.send may send from. Admins add a domain, publish the TXT
//! record shown, and verify it; everyone sees which domains are ready and how much of the
//! hour's sending allowance is used.

use leptos::prelude::*;

use crate::api::{
    email_page, AddEmailDomain, DomainStatus, EmailDomain, RemoveEmailDomain, VerifyEmailDomain,
};
use crate::components::{
    ActionError, AddCard, ButtonKind, ListCard, Loaded, OneFieldForm, Page, RowAction,
};

fn badge(status: DomainStatus) -> &'static str {
    match status {
        DomainStatus::Verified => {
            "rounded bg-emerald-100 px-2 py-0.5 text-xs font-medium text-emerald-800"
        }
        DomainStatus::Pending => {
            "rounded bg-amber-100 px-2 py-0.5 text-xs font-medium text-amber-800"
        }
    }
}

#[component]
fn DomainRow(
    d: EmailDomain,
    can_manage: bool,
    verify: ServerAction<VerifyEmailDomain>,
    remove: ServerAction<RemoveEmailDomain>,
) -> impl IntoView {
    let pending = d.status != DomainStatus::Verified;
    view! {
        <li class="py-4" data-testid="email-domain-row">
            <div class="flex items-center justify-between">
                <div>
                    <span class="font-medium">{d.domain.clone()}</span>
                    <span class=format!("ml-2 {}", badge(d.status))>{d.status.as_str()}</span>
                    {d.verified_at.clone().map(|t| view! { <span class="ml-2 text-xs text-slate-500">{format!("since {t}")}</span> })}
                </div>
                {can_manage.then(|| view! {
                    <div class="flex gap-2">
                        {pending.then(|| view! {
                            <RowAction action=verify id=d.id.clone() label="Verify" kind=ButtonKind::Primary aria_label=format!("Verify {}", d.domain)/>
                        })}
                        <RowAction action=remove id=d.id.clone() label="Remove" aria_label=format!("Remove {}", d.domain)
                            confirm=format!("Remove {}? email.send stops sending from it at once.", d.domain)/>
                    </div>
                })}
            </div>
            {pending.then(|| view! {
                <div class="mt-2 rounded-md bg-slate-50 p-3 text-sm">
                    <p class="text-slate-700">"Publish this TXT record in the domain's DNS, then verify:"</p>
                    <dl class="mt-1 grid grid-cols-[6rem_1fr] gap-x-2 font-mono text-xs">
                        <dt class="text-slate-500">"Type"</dt><dd>"TXT"</dd>
                        <dt class="text-slate-500">"Name"</dt><dd data-testid="record-name">{d.record_name.clone()}</dd>
                        <dt class="text-slate-500">"Value"</dt><dd class="break-all" data-testid="record-value">{d.record_value.clone()}</dd>
                    </dl>
                </div>
            })}
            {d.last_error.clone().filter(|_| pending).map(|e| view! { <p class="mt-1 text-xs text-red-700">{format!("Last check: {e}")}</p> })}
        </li>
    }
}

#[component]
pub fn Email() -> impl IntoView {
    let add = ServerAction::<AddEmailDomain>::new();
    let verify = ServerAction::<VerifyEmailDomain>::new();
    let remove = ServerAction::<RemoveEmailDomain>::new();
    let data = reloaded_after!(email_page(); add, verify, remove);
    view! {
        <Page current="/email" title="Email"
            subtitle="Sender domains email.send may send from. A domain is ready once its TXT record proves this project controls it.">
            <Loaded data=data content=move |d| {
                let can_manage = d.can_manage;
                let status = if d.configured {
                    format!("{} of {} messages sent in the last hour.", d.sent_last_hour, d.hourly_limit)
                } else {
                    "Sending is not set up on this workbench: the operator sets --smtp-url (WB_SMTP_URL).".to_owned()
                };
                let empty = d.domains.is_empty();
                let rows = d.domains.into_iter().map(|dom| view! { <DomainRow d=dom can_manage verify remove/> }).collect_view();
                view! {
                    <p class="mb-4 text-sm text-slate-600" data-testid="email-status">{status}</p>
                    <AddCard show=can_manage width="max-w-3xl">
                        <OneFieldForm action=add name="domain" label="Sender domain" placeholder="example.com" submit="Add domain"/>
                        <ActionError value=add.value()/>
                        <ActionError value=verify.value()/>
                        <ActionError value=remove.value()/>
                    </AddCard>
                    <ListCard empty=empty width="max-w-3xl" empty_text="No sender domains yet: email.send refuses every sender.">
                        {rows}
                    </ListCard>
                }.into_any()
            }/>
        </Page>
    }
}
