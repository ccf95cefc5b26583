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
//
// On /tasks and /decisions, once the person allows it (a button asks: browsers ask only on a
// click), a question newly waiting for them shows as the browser's own notification while the
// page is open. The server marks each such question (data-waits: its task and key, the
// notification's tag, so two tabs show it once); those there when the page loaded, and those this
// tab told of before (sessionStorage), are not told again. It names the tool, never what is asked
// or answered; a click on it opens the question.
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
  const tell = notifier(live);
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
        if (tell) tell(live);
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

  // The button that asks to notify, and what tells of the questions new to the page (null where
  // the page has no button, or the browser no notifications: then nothing is shown).
  function notifier(live) {
    const control = document.getElementById("notify");
    if (!control || !("Notification" in window) || !window.isSecureContext) return null;
    const ask = control.querySelector("#notify-ask");
    const said = control.querySelector("#notify-said");
    const SEEN = "longtools-notified";
    function show(asked) {
      const now = Notification.permission;
      control.hidden = now === "granted" && !asked;
      ask.hidden = now !== "default";
      if (now === "denied") said.textContent = "Notifications are blocked for this site in the browser's settings.";
      else if (now === "granted") said.textContent = "You will be notified while this page is open.";
      else said.textContent = "";
    }
    ask.addEventListener("click", () => {
      Notification.requestPermission().then(() => show(true), () => show(true));
    });
    show(false);
    let seen;
    try {
      seen = new Set(JSON.parse(window.sessionStorage.getItem(SEEN) || "[]"));
    } catch (e) {
      seen = new Set();
    }
    const waiting = (root) => Array.from(root.querySelectorAll("[data-waits]"));
    for (const question of waiting(live)) seen.add(question.getAttribute("data-waits")); // there already
    keep();
    return function (root) {
      for (const question of waiting(root)) {
        const tag = question.getAttribute("data-waits");
        if (seen.has(tag)) continue;
        seen.add(tag);
        if (Notification.permission === "granted") notify(tag, question);
      }
      keep();
    };

    function notify(tag, question) {
      const link = question.getAttribute("data-waits-link") || "";
      let shown;
      try {
        shown = new Notification(control.getAttribute("data-title"), {
          body: question.getAttribute("data-waits-body"),
          tag: tag,
        });
      } catch (e) {
        return; // a browser that shows them only from a service worker (Chrome on Android)
      }
      shown.onclick = () => {
        window.focus();
        shown.close();
        if (link.startsWith("/") && !link.startsWith("//")) window.location.assign(link); // this server's
      };
    }

    function keep() {
      try {
        window.sessionStorage.setItem(SEEN, JSON.stringify(Array.from(seen).slice(-200)));
      } catch (e) {
        // refused or full: this tab may tell of one again after a reload
      }
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
