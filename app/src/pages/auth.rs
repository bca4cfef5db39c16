//! Sign-in and first-admin setup: the two pages a visitor without a session can see.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::api::{SetUp, SignIn};
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
    view! {
        <Title text="Sign in"/>
        <AuthCard title="Sign in" subtitle="Use the email and password your workbench admin gave you.">
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
