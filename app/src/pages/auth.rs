//! Sign-in and first-admin setup: the two pages a visitor without a session can see.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::api::{sign_in_options, SetUp, SignIn, SignInChoices};
use crate::components::{ActionError, BUTTON, INPUT, LABEL};

#[component]
fn AuthCard(
    #[prop(into)] title: String,
    #[prop(into)] subtitle: String,
    children: Children,
) -> impl IntoView {
    view! {
        <div class="flex min-h-full flex-col items-center justify-center px-6 py-12">
            <p class="mb-8 text-xl font-semibold tracking-tight">"workbench"</p>
            <div class="w-full max-w-sm rounded-lg border border-slate-200 bg-white p-8 shadow-sm">
                <h1 class="text-lg font-semibold">{title}</h1>
                <p class="mt-1 mb-6 text-sm text-slate-600">{subtitle}</p>
                {children()}
            </div>
        </div>
    }
}

#[component]
pub fn Login() -> impl IntoView {
    let action = ServerAction::<SignIn>::new();
    let query = use_query_map();
    let next = move || query.read().get("next").unwrap_or_default();
    let sso_error = move || query.read().get("sso_error");
    let break_glass = move || query.read().get("break_glass").is_some();
    let options = Resource::new(|| (), |_| sign_in_options());
    let password_form = move || {
        view! {
            <ActionForm action=action attr:class="space-y-4">
                <input type="hidden" name="next" value=next/>
                <div>
                    <label for="email" class=LABEL>"Email"</label>
                    <input id="email" name="email" type="email" autocomplete="username" required class=INPUT/>
                </div>
                <div>
                    <label for="password" class=LABEL>"Password"</label>
                    <input id="password" name="password" type="password" autocomplete="current-password" required class=INPUT/>
                </div>
                <button type="submit" class=format!("{BUTTON} w-full justify-center") disabled=move || action.pending().get()>"Sign in"</button>
                <ActionError value=action.value()/>
            </ActionForm>
        }
    };
    view! {
        <Title text="Sign in"/>
        <AuthCard title="Sign in" subtitle="Sign in with your organisation's identity provider, or the email and password your workbench admin gave you.">
            {move || sso_error().map(|e| view! {
                <p class="mb-4 rounded-md bg-red-50 p-3 text-sm text-red-800" role="alert" data-testid="sso-error">{e}</p>
            })}
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move {
                    let o = options.await.unwrap_or(SignInChoices { providers: vec![], password_sign_in: true });
                    let target = next();
                    let buttons = o.providers.iter().map(|p| view! {
                        <form method="post" action=format!("/sso/{}/start", p.slug)>
                            <input type="hidden" name="next" value=target.clone()/>
                            <button type="submit" data-testid=format!("sso-{}", p.slug)
                                class="flex w-full justify-center rounded-md border border-slate-300 bg-white px-4 py-2 text-sm font-medium text-slate-800 shadow-sm hover:bg-slate-50">
                                {format!("Sign in with {}", p.name)}
                            </button>
                        </form>
                    }).collect_view();
                    let has_providers = !o.providers.is_empty();
                    let show_password = o.password_sign_in || break_glass();
                    view! {
                        <div class="space-y-2">{buttons}</div>
                        {(has_providers && show_password).then(|| view! { <p class="my-4 text-center text-xs uppercase text-slate-400">"or"</p> })}
                        {show_password.then(password_form)}
                        {(!o.password_sign_in && !break_glass()).then(|| view! {
                            <p class="mt-6 text-center text-xs text-slate-500">
                                <a href="/login?break_glass=1" class="underline" data-testid="break-glass">"Break-glass sign-in (operators)"</a>
                            </p>
                        })}
                    }
                })}
            </Suspense>
        </AuthCard>
    }
}

#[component]
pub fn Setup() -> impl IntoView {
    let action = ServerAction::<SetUp>::new();
    view! {
        <Title text="Set up"/>
        <AuthCard
            title="Create the first admin"
            subtitle="Nobody has an account yet. The account you create here administers workbench and its first project."
        >
            <ActionForm action=action attr:class="space-y-4">
                <div>
                    <label for="email" class=LABEL>"Email"</label>
                    <input id="email" name="email" type="email" autocomplete="username" required class=INPUT/>
                </div>
                <div>
                    <label for="password" class=LABEL>"Password"</label>
                    <input id="password" name="password" type="password" autocomplete="new-password" minlength="10" required class=INPUT/>
                    <p class="mt-1 text-xs text-slate-500">"At least 10 characters."</p>
                </div>
                <div>
                    <label for="project" class=LABEL>"Project name"</label>
                    <input id="project" name="project" type="text" value="default" required class=INPUT/>
                </div>
                <button type="submit" class=format!("{BUTTON} w-full justify-center") disabled=move || action.pending().get()>"Create admin"</button>
                <ActionError value=action.value()/>
            </ActionForm>
        </AuthCard>
    }
}
