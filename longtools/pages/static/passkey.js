// Passkeys in the browser (WebAuthn): adding one on /passkeys, and approving with one where a
// question asks for it. The server made every option (the challenge of an approval is that vote's
// own: the proposal, the task, the question and the voter); this only hands them to the browser,
// and its answer, as JSON in a hidden field, back to the server, which checks it.
"use strict";
(function () {
  if (!window.PublicKeyCredential || !navigator.credentials) {
    for (const form of document.querySelectorAll("[data-passkey-options], [data-passkey-challenge]")) {
      say(form, "This browser cannot use passkeys.");
    }
    return;
  }
  const bytes = (text) => {
    const padded = text.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((text.length + 3) % 4);
    return Uint8Array.from(atob(padded), (c) => c.charCodeAt(0)).buffer;
  };
  const text = (buffer) =>
    btoa(String.fromCharCode(...new Uint8Array(buffer)))
      .replace(/\+/g, "-")
      .replace(/\//g, "_")
      .replace(/=+$/, "");

  const adding = document.querySelector("form[data-passkey-options]");
  if (adding) {
    adding.addEventListener("submit", async (event) => {
      event.preventDefault();
      const options = JSON.parse(adding.getAttribute("data-passkey-options"));
      options.challenge = bytes(options.challenge);
      options.user.id = bytes(options.user.id);
      for (const known of options.excludeCredentials || []) known.id = bytes(known.id);
      try {
        const made = await navigator.credentials.create({ publicKey: options });
        adding.elements.namedItem("credential").value = JSON.stringify({
          id: made.id,
          rawId: text(made.rawId),
          type: made.type,
          response: {
            clientDataJSON: text(made.response.clientDataJSON),
            attestationObject: text(made.response.attestationObject),
            transports: made.response.getTransports ? made.response.getTransports() : [],
          },
          clientExtensionResults: {},
        });
      } catch (e) {
        say(adding, "No passkey was made: " + (e && e.message ? e.message : "the browser refused"));
        return;
      }
      adding.submit();
    });
  }

  const approving = document.querySelector("form[data-passkey-challenge]");
  if (approving) {
    approving.addEventListener("submit", async (event) => {
      const by = event.submitter;
      if (!by || by.value !== "accept" || approving.elements.namedItem("passkey").value) return;
      event.preventDefault();
      const allow = (approving.getAttribute("data-passkey-allow") || "").split(" ").filter(Boolean);
      try {
        const got = await navigator.credentials.get({
          publicKey: {
            challenge: bytes(approving.getAttribute("data-passkey-challenge")),
            rpId: approving.getAttribute("data-passkey-rp"),
            allowCredentials: allow.map((id) => ({ type: "public-key", id: bytes(id) })),
            userVerification: "required",
            timeout: 60000,
          },
        });
        approving.elements.namedItem("passkey").value = JSON.stringify({
          id: got.id,
          rawId: text(got.rawId),
          type: got.type,
          response: {
            clientDataJSON: text(got.response.clientDataJSON),
            authenticatorData: text(got.response.authenticatorData),
            signature: text(got.response.signature),
            userHandle: got.response.userHandle ? text(got.response.userHandle) : null,
          },
          clientExtensionResults: {},
        });
      } catch (e) {
        say(approving, "Not approved: your passkey did not confirm it (" + (e && e.name ? e.name : "refused") + ").");
        return;
      }
      approving.requestSubmit(by); // the same button: its action goes with the form
    });
  }

  function say(form, words) {
    let shown = form.querySelector(".passkey-error");
    if (!shown) {
      shown = document.createElement("p");
      shown.className = "error passkey-error";
      shown.setAttribute("role", "alert");
      form.prepend(shown);
    }
    shown.hidden = false;
    shown.textContent = words;
  }
})();
