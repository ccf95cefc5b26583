// Follows a task (or the list of tasks) live: asks the server for the part of the page that changed.
// The server holds each request until something changes or about 25 s pass, so this loop costs one
// request per change. Without JavaScript the page still works; it shows what was true when loaded.
//
// A "Copy the link" button (a decision's approvers' link, on its task's page) copies the link it
// names; without a clipboard it stays hidden, and the link is copied as any link is.
//
// It also keeps what a person typed into an answer form while they sign in again: saved in this
// tab (sessionStorage) when the form is sent, filled in again when the question's page comes back
// after a sign-in, and dropped on any other page. Never a password field's value: a secret is
// typed again.
"use strict";
(function () {
  const DRAFT = "longtools-draft:";
  keepDrafts();
  showScripted(document);
  document.addEventListener("click", copyLink);
  // The first field to change, else what is wrong with the form as a whole.
  const firstError = document.querySelector("[aria-invalid=true]") || document.querySelector("#form-error");
  if (firstError) firstError.focus();
  const live = document.querySelector("[data-live]");
  if (!live) return;
  const url = live.getAttribute("data-live");
  let version = live.getAttribute("data-version");
  const wait = (ms) => new Promise((done) => setTimeout(done, ms));
  async function follow() {
    let pause = 1000;
    for (;;) {
      let response;
      try {
        response = await fetch(url + (url.includes("?") ? "&" : "?") + "v=" + encodeURIComponent(version), {
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
      if (!response.ok || response.status === 204) {
        await wait(pause);
        pause = Math.min(pause * 2, 30000);
        continue;
      }
      const news = await response.json();
      const changed = news.v !== version;
      if (changed) {
        live.innerHTML = news.html; // rendered and escaped by the server
        showScripted(live);
        version = news.v;
        live.setAttribute("data-version", version);
      }
      if (news.done) {
        live.setAttribute("data-done", "true");
        return;
      }
      pause = 1000;
      // Answered at once because the server had no place to hold the request: ask again later.
      if (news.again_s) await wait(news.again_s * 1000);
      else if (!changed) await wait(1000);
    }
  }
  follow();

  // What works only with a script is shown once it runs (copying, only where there is a clipboard).
  function showScripted(root) {
    for (const hidden of root.querySelectorAll(".with-script[hidden]")) {
      if (!hidden.hasAttribute("data-copy") || (navigator.clipboard && window.isSecureContext)) hidden.hidden = false;
    }
  }

  function copyLink(event) {
    const button = event.target.closest ? event.target.closest("[data-copy]") : null;
    if (!button) return;
    const link = document.getElementById(button.getAttribute("data-copy"));
    const said = button.parentElement.querySelector(".copied");
    if (!link) return;
    navigator.clipboard.writeText(link.href).then(
      () => {
        if (said) said.textContent = "Copied.";
      },
      () => {
        if (said) said.textContent = "Not copied: copy the link itself.";
      },
    );
  }

  function keepDrafts() {
    const form = document.querySelector("form.answer");
    const key = DRAFT + window.location.pathname;
    let store;
    try {
      store = window.sessionStorage;
    } catch (e) {
      return; // storage refused: nothing is kept
    }
    if (form && form.hasAttribute("data-draft")) restore(form, store.getItem(key));
    // Kept only on the way through a sign-in: the page that says the answer was not sent, and the
    // sign-in itself (and the issuer's, which is another site's page).
    const passing = document.querySelector("[data-drafts=keep]") || window.location.pathname.startsWith("/signin");
    if (!passing) {
      for (let i = store.length - 1; i >= 0; i--) {
        const name = store.key(i);
        if (name && name.startsWith(DRAFT)) store.removeItem(name);
      }
    }
    if (form) {
      form.addEventListener("submit", () => {
        const kept = [];
        for (const [name, value] of new FormData(form)) {
          const field = form.elements.namedItem(name);
          const secret = field && (field.type === "password" || field.type === "hidden");
          if (!secret && typeof value === "string") kept.push([name, value]);
        }
        try {
          store.setItem(key, JSON.stringify(kept));
        } catch (e) {
          // full or refused: the answer is sent all the same
        }
      });
    }
  }

  function restore(form, saved) {
    let pairs;
    try {
      pairs = JSON.parse(saved || "null");
    } catch (e) {
      return;
    }
    if (!Array.isArray(pairs)) return;
    const given = (name) => pairs.filter((pair) => pair[0] === name).map((pair) => pair[1]);
    for (const input of form.querySelectorAll("input[name], select[name], textarea[name]")) {
      if (input.type === "password" || input.type === "hidden") continue;
      const values = given(input.name);
      if (input.type === "checkbox" || input.type === "radio") input.checked = values.includes(input.value);
      else if (values.length) input.value = values[values.length - 1];
    }
  }
})();
