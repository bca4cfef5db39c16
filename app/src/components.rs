//! Building blocks shared by the pages: the signed-in layout with its navigation, the page kit
//! (`Loaded`: the load/suspense/error skeleton every page repeats; `AddCard`: an admin's add
//! form; `ListCard` and `Table`: the list shells; `RowAction`: a row's one-button form), and
//! small presentational pieces (error notes, cards, buttons).

use leptos::prelude::*;
use leptos::server_fn::{client::Client, codec::PostUrl, request::ClientReq, Http, ServerFn};
use leptos_meta::Title;

use crate::api::{pending_confirmations, viewer, SignOut};
use crate::AppError;

/// The sections of the portal. Those without a page yet are shown, but not as links.
const SECTIONS: &[(&str, Option<&str>)] = &[
    ("Overview", Some("/")),
    ("Tools", Some("/tools")),
    ("Tool sets", Some("/tool-sets")),
    ("Connections", Some("/connections")),
    ("Confirmations", Some("/confirmations")),
    ("Callbacks", Some("/callbacks")),
    ("Email", Some("/email")),
    ("Vault", Some("/vault")),
    ("MCP servers", Some("/mcp-servers")),
    ("Apps", Some("/apps")),
    ("Policies", Some("/policies")),
    ("Egress", Some("/egress")),
    ("Audit", Some("/audit")),
    ("Usage", Some("/usage")),
    ("API keys", Some("/api-keys")),
    ("MCP clients", Some("/mcp-clients")),
    ("Members", Some("/members")),
    ("Sign-in", Some("/sso")),
];

/// The frame of every signed-in page: navigation on the left, who is signed in and a sign-out
/// button, the page on the right.
#[component]
pub fn Layout(#[prop(into)] current: String, children: Children) -> impl IntoView {
    let me = Resource::new(|| (), |_| viewer());
    let pending = Resource::new(|| (), |_| pending_confirmations());
    let sign_out = ServerAction::<SignOut>::new();
    let nav = SECTIONS
        .iter()
        .map(|(label, href)| match href {
            Some(href) => {
                let active = *href == current;
                let class = if active {
                    "block rounded-md bg-slate-800 px-3 py-2 text-sm font-medium text-white"
                } else {
                    "block rounded-md px-3 py-2 text-sm text-slate-300 hover:bg-slate-800 hover:text-white"
                };
                // Calls waiting for a person: counted next to Confirmations.
                let count = (*href == "/confirmations").then(|| view! {
                    <Suspense fallback=|| ()>
                        {move || Suspend::new(async move {
                            pending.await.ok().filter(|n| *n > 0).map(|n| view! {
                                <span class="ml-2 rounded-full bg-amber-400 px-1.5 text-xs font-semibold text-slate-900" data-testid="pending-count" title="waiting for a decision">{n}</span>
                            })
                        })}
                    </Suspense>
                });
                view! { <li><a href=*href class=class aria-current=active.then_some("page")>{*label}{count}</a></li> }.into_any()
            }
            None => view! {
                <li>
                    <span class="flex items-center justify-between px-3 py-2 text-sm text-slate-500" title="not available yet">
                        {*label}
                        <span class="rounded bg-slate-800 px-1.5 text-[10px] uppercase tracking-wide text-slate-500">"soon"</span>
                    </span>
                </li>
            }
            .into_any(),
        })
        .collect_view();
    view! {
        <div class="flex min-h-full">
            <aside class="flex w-60 shrink-0 flex-col bg-slate-900 px-3 py-5">
                <a href="/" class="mb-6 px-3 text-lg font-semibold tracking-tight text-white">"workbench"</a>
                <nav aria-label="Sections"><ul class="space-y-0.5">{nav}</ul></nav>
                <div class="mt-auto border-t border-slate-800 px-3 pt-4 text-sm text-slate-300">
                    <Suspense fallback=|| ()>
                        {move || Suspend::new(async move {
                            me.await.ok().flatten().map(|v| view! {
                                <p class="truncate font-medium text-white" data-testid="viewer-email">{v.email}</p>
                                <p class="truncate text-xs text-slate-400">
                                    {v.project} " · " {if v.is_admin { "admin" } else { "member" }}
                                </p>
                            })
                        })}
                    </Suspense>
                    <ActionForm action=sign_out attr:class="mt-3">
                        <button type="submit" class="text-sm text-slate-300 underline hover:text-white">"Sign out"</button>
                    </ActionForm>
                </div>
            </aside>
            <main class="flex-1 px-10 py-8">{children()}</main>
        </div>
    }
}

/// A signed-in page: the browser tab's title, the navigation with `current` marked, and the
/// page's heading (`heading`, else `title`) with its subtitle above the content.
#[component]
pub fn Page(
    current: &'static str,
    title: &'static str,
    #[prop(optional)] heading: Option<&'static str>,
    #[prop(optional)] subtitle: &'static str,
    children: Children,
) -> impl IntoView {
    view! {
        <Title text=title/>
        <Layout current=current>
            <PageHeader title=heading.unwrap_or(title) subtitle=subtitle/>
            {children()}
        </Layout>
    }
}

#[component]
pub fn PageHeader(
    #[prop(into)] title: String,
    #[prop(into, optional)] subtitle: String,
) -> impl IntoView {
    view! {
        <header class="mb-6">
            <h1 class="text-2xl font-semibold tracking-tight">{title}</h1>
            {(!subtitle.is_empty()).then(|| view! { <p class="mt-1 text-sm text-slate-600">{subtitle}</p> })}
        </header>
    }
}

/// Shows the error of the latest submission, if any.
#[component]
pub fn ActionError<T, S>(value: S) -> impl IntoView
where
    T: Clone + Send + Sync + 'static,
    S: Get<Value = Option<Result<T, AppError>>> + Send + Sync + 'static,
{
    move || {
        value.get().and_then(Result::err).map(|e| {
            view! {
                <p role="alert" class="mt-3 rounded-md border border-red-200 bg-red-50 px-3 py-2 text-sm text-red-800">
                    {e.to_string()}
                </p>
            }
        })
    }
}

/// A page without the navigation (connect links, consent): one card in the middle.
#[component]
pub fn Centered(children: Children) -> impl IntoView {
    view! {
        <div class="flex min-h-full flex-col items-center justify-center px-6 py-12">
            <p class="mb-8 text-xl font-semibold tracking-tight">"workbench"</p>
            <div class="w-full max-w-md rounded-lg border border-slate-200 bg-white p-8 shadow-sm">{children()}</div>
        </div>
    }
}

/// A page's data: "Loading…" while it loads, the error note if it failed, else `content` of it.
#[component]
pub fn Loaded<T, F>(data: Resource<Result<T, AppError>>, content: F) -> impl IntoView
where
    T: Clone + Send + Sync + 'static,
    F: Fn(T) -> AnyView + Clone + Send + Sync + 'static,
{
    view! {
        <Suspense fallback=|| view! { <p class="text-sm text-slate-500">"Loading…"</p> }>
            {move || {
                let content = content.clone();
                Suspend::new(async move {
                    match data.await {
                        Err(error) => view! { <LoadError error/> }.into_any(),
                        Ok(d) => content(d),
                    }
                })
            }}
        </Suspense>
    }
}

/// An admin's form above a list: a card shown only to whoever may manage (`show`).
#[component]
pub fn AddCard(
    show: bool,
    /// A max-width class, e.g. `max-w-xl`.
    #[prop(optional)]
    width: &'static str,
    children: Children,
) -> impl IntoView {
    let class = if width.is_empty() {
        format!("{CARD} mb-6")
    } else {
        format!("{CARD} mb-6 {width}")
    };
    show.then(|| view! { <section class=class>{children()}</section> })
}

/// A list's card: `empty_text` when there is nothing to list, else the rows (children, `<li>`s)
/// in a divided list.
#[component]
pub fn ListCard(
    empty: bool,
    /// A max-width class, e.g. `max-w-xl`.
    width: &'static str,
    empty_text: &'static str,
    children: Children,
) -> impl IntoView {
    view! {
        <section class=format!("{CARD} {width}")>
            {if empty {
                view! { <p class="text-sm text-slate-600">{empty_text}</p> }.into_any()
            } else {
                view! { <ul class="divide-y divide-slate-100">{children()}</ul> }.into_any()
            }}
        </section>
    }
}

/// A list table: its column headings, and the rows as children.
#[component]
pub fn Table(headers: &'static [&'static str], children: Children) -> impl IntoView {
    let last = headers.len().saturating_sub(1);
    let heads = headers
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let class = if i == last { "pb-2" } else { "pb-2 pr-4" };
            view! { <th class=class>{*h}</th> }
        })
        .collect_view();
    view! {
        <table class="w-full text-left text-sm">
            <thead class="text-xs uppercase tracking-wide text-slate-500">
                <tr>{heads}</tr>
            </thead>
            <tbody>{children()}</tbody>
        </table>
    }
}

/// How a row action's button looks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ButtonKind {
    /// Removes or revokes something: red outline.
    #[default]
    Danger,
    /// The row's main step forward (verify, approve).
    Primary,
    /// A harmless step (refresh).
    Plain,
}

const BUTTON_PLAIN: &str = "inline-flex items-center rounded-md border border-slate-300 bg-white px-3 py-1 text-xs font-medium";

/// One button acting on one row: a form that sends the row's `id` (and `extra` hidden fields)
/// to a server function taking `id`, asking first when `confirm` is set (with JavaScript; a
/// plain form post without it does not ask).
#[component]
pub fn RowAction<S, O>(
    action: ServerAction<S>,
    #[prop(into)] id: String,
    /// The button's text.
    label: &'static str,
    /// What assistive technology names the button, e.g. "Delete crm".
    #[prop(into, optional)]
    aria_label: Option<String>,
    /// A question the browser asks before sending (irreversible steps).
    #[prop(into, optional)]
    confirm: Option<String>,
    #[prop(optional)] kind: ButtonKind,
    /// More hidden fields: (name, value).
    #[prop(optional)]
    extra: Vec<(&'static str, String)>,
    /// Classes of the form, e.g. `ml-auto`.
    #[prop(optional)]
    class: &'static str,
    #[prop(optional)] testid: Option<&'static str>,
) -> impl IntoView
where
    S: serde::de::DeserializeOwned
        + ServerFn<Protocol = Http<PostUrl, O>>
        + Clone
        + Send
        + Sync
        + 'static,
    <<S::Client as Client<S::Error>>::Request as ClientReq<S::Error>>::FormData:
        From<leptos::web_sys::FormData>,
    S::Output: Send + Sync + 'static,
    S::Error: Send + Sync + 'static,
    S::Client: Client<S::Error>,
{
    // Asked on the button's click, which comes before the form's submit event: ActionForm's
    // own submit handler may run before any other listener on the form, so a refusal there
    // would come too late.
    let ask = move |ev: leptos::ev::MouseEvent| {
        if let Some(q) = &confirm {
            if !window().confirm_with_message(q).unwrap_or(false) {
                ev.prevent_default();
            }
        }
    };
    let button = match kind {
        ButtonKind::Danger => BUTTON_DANGER,
        ButtonKind::Primary => BUTTON,
        ButtonKind::Plain => BUTTON_PLAIN,
    };
    let extra = extra
        .into_iter()
        .map(|(name, value)| view! { <input type="hidden" name=name value=value/> })
        .collect_view();
    view! {
        <ActionForm action=action attr:class=class>
            <input type="hidden" name="id" value=id/>
            {extra}
            <button type="submit" class=button aria-label=aria_label data-testid=testid on:click=ask>{label}</button>
        </ActionForm>
    }
}

/// An admin's one-field add form: a labelled text input and its button, in one row.
#[component]
pub fn OneFieldForm<S, O>(
    action: ServerAction<S>,
    /// The field's name (what the server function takes) and its element id.
    name: &'static str,
    label: &'static str,
    #[prop(optional)] placeholder: &'static str,
    /// The button's text.
    submit: &'static str,
) -> impl IntoView
where
    S: serde::de::DeserializeOwned
        + ServerFn<Protocol = Http<PostUrl, O>>
        + Clone
        + Send
        + Sync
        + 'static,
    <<S::Client as Client<S::Error>>::Request as ClientReq<S::Error>>::FormData:
        From<leptos::web_sys::FormData>,
    S::Output: Send + Sync + 'static,
    S::Error: Send + Sync + 'static,
    S::Client: Client<S::Error>,
{
    view! {
        <ActionForm action=action attr:class="flex items-end gap-3">
            <div class="flex-1">
                <label for=name class=LABEL>{label}</label>
                <input id=name name=name type="text" required placeholder=placeholder class=INPUT/>
            </div>
            <button type="submit" class=BUTTON>{submit}</button>
        </ActionForm>
    }
}

#[component]
pub fn LoadError(error: AppError) -> impl IntoView {
    view! {
        <p role="alert" class="rounded-md border border-red-200 bg-red-50 px-3 py-2 text-sm text-red-800">
            {error.to_string()}
        </p>
    }
}

pub const INPUT: &str = "block w-full rounded-md border border-slate-300 bg-white px-3 py-2 text-sm shadow-sm focus:border-indigo-500 focus:outline-none focus:ring-1 focus:ring-indigo-500";
pub const LABEL: &str = "block text-sm font-medium text-slate-700 mb-1";
pub const BUTTON: &str = "inline-flex items-center rounded-md bg-indigo-600 px-4 py-2 text-sm font-medium text-white shadow-sm hover:bg-indigo-500 disabled:opacity-50";
pub const BUTTON_DANGER: &str = "inline-flex items-center rounded-md border border-red-300 bg-white px-3 py-1 text-xs font-medium text-red-700 hover:bg-red-50";
pub const CARD: &str = "rounded-lg border border-slate-200 bg-white p-6 shadow-sm";

/// `?k=v&…` of the pairs with a value, each value percent-encoded (empty when none has one).
pub fn url_query(pairs: &[(&str, &str)]) -> String {
    let parts: Vec<String> = pairs
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}={}", encode(v)))
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("?{}", parts.join("&"))
    }
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
