// Follows a task (or the list of tasks) live: asks the server for the part of the page that changed.
// The server holds each request until something changes or about 25 s pass, so this loop costs one
// request per change. Without JavaScript the page still works; it shows what was true when loaded.
"use strict";
(function () {
  const live = document.querySelector("[data-live]");
  const firstError = document.querySelector("[aria-invalid=true], #form-error");
  if (firstError) firstError.focus();
  if (!live) return;
  const url = live.getAttribute("data-live");
  let version = live.getAttribute("data-version");
  const wait = (ms) => new Promise((done) => setTimeout(done, ms));
  async function follow() {
    let pause = 1000;
    for (;;) {
      let response;
      try {
        response = await fetch(url + "?v=" + encodeURIComponent(version), {
          credentials: "same-origin",
          headers: { Accept: "application/json" },
        });
      } catch (e) {
        await wait(pause);
        pause = Math.min(pause * 2, 30000);
        continue;
      }
      if (response.status === 401) {
        window.location.reload(); // signed out: the page leads to the sign-in
        return;
      }
      if (response.status === 404) {
        live.setAttribute("data-gone", "true");
        return;
      }
      if (!response.ok) {
        await wait(pause);
        pause = Math.min(pause * 2, 30000);
        continue;
      }
      const news = await response.json();
      const changed = news.v !== version;
      if (changed) {
        live.innerHTML = news.html; // rendered and escaped by the server
        version = news.v;
        live.setAttribute("data-version", version);
      }
      if (news.done) {
        live.setAttribute("data-done", "true");
        return;
      }
      pause = 1000;
      // The server answers at once when it may not hold the request (its bounds): do not spin.
      if (!changed) await wait(1000);
    }
  }
  follow();
})();
