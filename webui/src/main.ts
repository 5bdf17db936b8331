import { mount } from "svelte";

import App from "./App.svelte";
import "./app.css";

mount(App, { target: document.getElementById("app")! });

// The service worker (public/sw.js) makes the app installable and keeps its shell for when the
// server is unreachable; it never touches API requests.
if ("serviceWorker" in navigator) {
  navigator.serviceWorker.register("/sw.js").catch(() => {
    // Served over plain HTTP from another host than localhost: no service worker, same app.
  });
}
