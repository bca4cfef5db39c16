//! Members of the project: everyone can see who is in it; admins add people with an initial
//! password and a role, and remove them.

use leptos::prelude::*;

use crate::api::{members_page, AddMember, RemoveMember};
use crate::components::{
    ActionError, ButtonKind, Loaded, Page, RowAction, Table, BUTTON, CARD, INPUT, LABEL,
};

#[component]
pub fn Members() -> impl IntoView {
    let add = ServerAction::<AddMember>::new();
    let remove = ServerAction::<RemoveMember>::new();
    let page = reloaded_after!(members_page(); add, remove);
    view! {
        <Page current="/members" title="Members"
            subtitle="People who can sign in to this project.">
            <Loaded data=page content=move |data| {
                let can_manage = data.can_manage;
                let rows = data.members.into_iter().map(|m| {
                    let action = (can_manage && !m.is_you).then(|| view! {
                        <RowAction action=remove id=m.user_id.clone() label="Remove" kind=ButtonKind::Danger
                            aria_label=format!("Remove {}", m.email)
                            confirm=format!("Remove {} from the project? Their API keys, approved MCP clients and connections end now.", m.email)/>
                    });
                    view! {
                        <tr class="border-t border-slate-100" data-testid="member-row">
                            <td class="py-2 pr-4 font-medium">{m.email} {m.is_you.then_some(" (you)")}</td>
                            <td class="py-2 pr-4 text-slate-600">{m.role.as_str()}</td>
                            <td class="py-2 pr-4 text-slate-600">{m.joined}</td>
                            <td class="py-2 text-right">{action}</td>
                        </tr>
                    }
                }).collect_view();
                view! {
                    {data.can_manage.then(|| view! {
                        <section class=format!("{CARD} mb-6 max-w-2xl")>
                            <h2 class="mb-4 font-medium">"Add a member"</h2>
                            <ActionForm action=add attr:class="grid grid-cols-2 gap-4">
                                <div>
                                    <label for="member-email" class=LABEL>"Email"</label>
                                    <input id="member-email" name="email" type="email" required class=INPUT/>
                                </div>
                                <div>
                                    <label for="member-password" class=LABEL>"Initial password"</label>
                                    <input id="member-password" name="password" type="password" minlength="10" autocomplete="new-password" required class=INPUT/>
                                </div>
                                <div>
                                    <label for="member-role" class=LABEL>"Role"</label>
                                    <select id="member-role" name="role" class=INPUT>
                                        <option value="member" selected>"member"</option>
                                        <option value="admin">"admin"</option>
                                    </select>
                                </div>
                                <div class="flex items-end"><button type="submit" class=BUTTON>"Add member"</button></div>
                            </ActionForm>
                            <ActionError value=add.value()/>
                            <ActionError value=remove.value()/>
                        </section>
                    })}
                    <section class=CARD>
                        <Table headers=&["Email", "Role", "Joined", ""]>{rows}</Table>
                    </section>
                }.into_any()
            }/>
        </Page>
    }
}
