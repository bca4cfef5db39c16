//! The browser entry point: hydrates the server-rendered portal once the WASM bundle loads.

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_body(workbench_app::App);
}
