// The inbox's progressive parts: live lists and runs (Server-Sent Events), answers sent without
// leaving the page, the keys (j/k move, a approve, r reject, / find) and times kept current.
// The pages work without it: every answer is a plain form post.
"use strict";

const typing = (el) => el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));

// As layout.rs says them: `duration` (how long: "under a minute", "4 min") and `ago_text`
// (when: "just now", "4 min ago").
function duration(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return "under a minute";
  if (s < 3600) return Math.floor(s / 60) + " min";
  if (s < 86400) return Math.floor(s / 3600) + " h";
  return Math.floor(s / 86400) + " d";
}

const agoText = (ms) => (ms < 60000 ? "just now" : duration(ms) + " ago");

function tick() {
  for (const t of document.querySelectorAll("time[data-since]")) {
    const ms = Date.now() - Number(t.dataset.since);
    t.textContent = "ago" in t.dataset ? agoText(ms) : duration(ms);
  }
}
setInterval(tick, 30000);

// ---- The queue -------------------------------------------------------------------------------

function queuePage(queue) {
  const find = document.getElementById("find");
  let selected = null;

  const rows = () => [...queue.querySelectorAll("li.item")].filter((li) => !li.hidden);
  const select = (li) => {
    for (const r of queue.querySelectorAll("li.item.selected")) r.classList.remove("selected");
    selected = li ? li.dataset.id : null;
    if (li) {
      li.classList.add("selected");
      li.querySelector("a").focus();
    }
  };
  const applyFind = () => {
    const q = (find && find.value || "").trim().toLowerCase();
    for (const li of queue.querySelectorAll("li.item")) {
      li.hidden = q !== "" && !li.textContent.toLowerCase().includes(q);
    }
  };
  if (find) find.addEventListener("input", applyFind);

  // After the list changed: the find filter again, the selection kept where its item still is.
  const changed = (focused) => {
    applyFind();
    const again = selected && queue.querySelector(`li.item[data-id="${CSS.escape(selected)}"]`);
    if (again) {
      again.classList.add("selected");
      if (focused) again.querySelector("a").focus();
    }
    queue.dataset.updated = String(Date.now());
  };

  // Whether item `a` comes before `b` in the list's order: by how long each waited (oldest or
  // newest first), then by thread, as the server orders them.
  const before = (a, b, newest) => {
    const sa = Number(a.dataset.since);
    const sb = Number(b.dataset.since);
    if (sa !== sb) return newest ? sa > sb : sa < sb;
    return a.dataset.thread < b.dataset.thread;
  };

  const live = new EventSource(queue.dataset.live);
  live.addEventListener("queue", (e) => {
    const focused = queue.contains(document.activeElement);
    queue.innerHTML = e.data;
    changed(focused);
  });
  // One thread changed: the counts, and its items put in (or taken out) where they belong.
  const one = (e) => {
    const focused = queue.contains(document.activeElement);
    const part = document.createElement("template");
    part.innerHTML = e.data;
    const head = part.content.getElementById("queue-head");
    const oldHead = queue.querySelector("#queue-head");
    if (head && oldHead) oldHead.replaceWith(head);
    const list = queue.querySelector("ol.items");
    const fresh = part.content.querySelector("ol[data-thread]");
    if (!list || !fresh) return;
    const thread = fresh.dataset.thread;
    for (const li of list.querySelectorAll(`li.item[data-thread="${CSS.escape(thread)}"]`)) li.remove();
    const newest = list.dataset.order === "newest";
    for (const li of [...fresh.children]) {
      const next = [...list.children].find((x) => before(li, x, newest));
      list.insertBefore(li, next || null);
    }
    changed(focused);
  };
  live.addEventListener("item", one);
  live.addEventListener("remove", one);

  document.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (typing(e.target)) {
      if (e.key === "Escape") e.target.blur();
      return;
    }
    const list = rows();
    const at = list.findIndex((li) => li.dataset.id === selected);
    if (e.key === "j" || e.key === "k") {
      e.preventDefault();
      const next = e.key === "j" ? Math.min(at + 1, list.length - 1) : Math.max(at - 1, 0);
      select(list[next] || null);
    } else if ((e.key === "a" || e.key === "r") && at >= 0) {
      e.preventDefault();
      location.href = list[at].querySelector("a").href + (e.key === "a" ? "#approve" : "#reject");
    } else if (e.key === "/" && find) {
      e.preventDefault();
      find.focus();
    }
  });
}

// ---- One question ----------------------------------------------------------------------------

function itemPage(live) {
  const notice = document.getElementById("notice");
  const after = document.getElementById("after");
  const state = document.getElementById("state");
  const answer = document.getElementById("answer");
  let ready = null;
  const isReady = new Promise((resolve) => (ready = resolve));

  const follow = new EventSource(live.dataset.follow);
  follow.addEventListener("ready", () => ready());
  follow.addEventListener("message", (e) => {
    after.insertAdjacentHTML("beforeend", e.data);
    live.classList.add("moving");
  });
  // No form offers to answer again; what was typed and not sent stays, to copy (as the page
  // without script keeps it).
  const retire = () => {
    if (!answer || !answer.isConnected) return;
    const typed = [...answer.querySelectorAll("textarea")].some((t) => t.value.trim() !== "");
    if (!typed) {
      answer.remove();
      return;
    }
    for (const b of answer.querySelectorAll("button")) b.disabled = true;
    for (const t of answer.querySelectorAll("textarea")) t.readOnly = true;
    for (const f of answer.querySelectorAll("input[type=file]")) f.disabled = true;
    const title = document.getElementById("answer-title");
    if (title) title.textContent = "Your answer (not sent)";
  };

  follow.addEventListener("answered", (e) => {
    // Answered, here or elsewhere.
    if (!notice.dataset.mine) notice.innerHTML = e.data;
    retire();
    const waiting = document.getElementById("waiting");
    if (waiting) waiting.remove();
  });
  follow.addEventListener("settled", (e) => {
    state.innerHTML = e.data;
    live.classList.add("moving", "settled");
    live.dataset.settled = "true";
    follow.close();
  });

  const say = (text, role) => {
    notice.textContent = "";
    const p = document.createElement("p");
    p.className = role === "alert" ? "error" : "answered";
    p.setAttribute("role", role);
    p.textContent = text;
    notice.appendChild(p);
  };

  // A form with a file chosen goes as multipart (the file streams into the thread); without
  // one, as the plain fields.
  const formBody = (form) => {
    const data = new FormData(form);
    const file = form.querySelector("input[type=file]");
    if (file && file.files.length > 0) return data;
    data.delete("file");
    return new URLSearchParams(data);
  };

  for (const form of document.querySelectorAll("form.answer-form")) {
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      if (!form.reportValidity()) return;
      const buttons = [...document.querySelectorAll("form.answer-form button")];
      buttons.forEach((b) => (b.disabled = true));
      await isReady;
      let response;
      try {
        response = await fetch(form.getAttribute("action"), {
          method: "POST",
          headers: { Accept: "application/json" },
          body: formBody(form),
          credentials: "same-origin",
        });
      } catch (err) {
        buttons.forEach((b) => (b.disabled = false));
        say("Could not reach the server: " + err.message + ". Try again.", "alert");
        return;
      }
      const body = await response.json().catch(() => ({}));
      if (response.ok) {
        notice.dataset.mine = "true";
        say("Your answer was sent. Following the run…", "status");
        if (answer) answer.remove();
      } else if (response.status === 409 && body.answer) {
        const a = body.answer;
        notice.dataset.mine = "true";
        notice.innerHTML = "";
        const box = document.createElement("div");
        box.className = "answered refused";
        box.setAttribute("role", "alert");
        box.dataset.author = a.author || "someone";
        const p = document.createElement("p");
        const not = document.createElement("strong");
        not.textContent = "Your answer was NOT sent.";
        p.append(not, ` ${a.author || "someone"} had answered first, at ${new Date(a.at).toLocaleString()}:`);
        const q = document.createElement("blockquote");
        q.textContent = a.content;
        box.append(p, q);
        notice.appendChild(box);
        retire();
      } else {
        buttons.forEach((b) => (b.disabled = false));
        say(body.detail || `The server answered ${response.status}.`, "alert");
      }
    });
  }

  const focusFor = (hash) => {
    const el = document.getElementById(hash === "#reject" ? "reason" : hash === "#approve" ? "approve" : "");
    if (el) el.focus();
  };
  focusFor(location.hash);

  document.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey || typing(e.target)) {
      if (typing(e.target) && e.key === "Escape") e.target.blur();
      return;
    }
    if (e.key === "a" && document.getElementById("approve")) {
      e.preventDefault();
      document.getElementById("approve").closest("form").requestSubmit();
    } else if (e.key === "r" && document.getElementById("reason")) {
      e.preventDefault();
      document.getElementById("reason").focus();
    }
  });
}

// ---- A step's tool calls ---------------------------------------------------------------------
// Each decision form is the plain post the page without script sends; here it is sent with
// fetch and the page the server answers (the outcome, or the page again with the refusal at its
// field and what was typed) is put in place of the old one: no reload, the same HTML.

function stepPage(live) {
  let busy = false;
  const follow = new EventSource(live.dataset.follow);

  // Whether the person has typed something a fresh page would lose.
  const dirty = () => [...document.querySelectorAll("form.decide-form")].some((f) =>
    [...f.elements].some((el) =>
      (el.tagName === "TEXTAREA" || (el.tagName === "INPUT" && el.type !== "hidden")) &&
      (el.type === "checkbox" ? el.checked !== el.defaultChecked : el.value !== el.defaultValue)) ||
    [...f.querySelectorAll("select")].some((s) => [...s.options].some((o) => o.selected !== o.defaultSelected)));

  const swap = (html, url) => {
    const fresh = new DOMParser().parseFromString(html, "text/html").getElementById("main");
    const main = document.getElementById("main");
    if (!fresh || !main) return;
    main.innerHTML = fresh.innerHTML;
    if (url && url !== location.href) history.replaceState(null, "", url);
    const invalid = main.querySelector("[aria-invalid=true]");
    const alert = main.querySelector("#notice [role=alert]");
    if (invalid) invalid.focus();
    else if (alert) { alert.tabIndex = -1; alert.focus(); }
    main.dataset.swapped = String(Number(main.dataset.swapped || 0) + 1);
  };

  const say = (text) => {
    const notice = document.getElementById("notice");
    if (!notice) return;
    notice.textContent = "";
    const p = document.createElement("p");
    p.className = "error";
    p.setAttribute("role", "alert");
    p.textContent = text;
    notice.appendChild(p);
  };

  document.addEventListener("submit", async (e) => {
    const form = e.target;
    if (!(form instanceof HTMLFormElement) || !form.classList.contains("decide-form")) return;
    e.preventDefault();
    if (!form.noValidate && !form.reportValidity()) return;
    const body = new URLSearchParams(new FormData(form, e.submitter));
    const buttons = [...document.querySelectorAll("form.decide-form button")];
    buttons.forEach((b) => (b.disabled = true));
    const state = document.getElementById("state");
    if (state) state.textContent = "Your decision is sent; following the run…";
    busy = true;
    try {
      const response = await fetch(form.getAttribute("action"), {
        method: "POST", body, credentials: "same-origin", headers: { Accept: "text/html" },
      });
      swap(await response.text(), response.redirected ? response.url : null);
    } catch (err) {
      buttons.forEach((b) => (b.disabled = false));
      say("Could not reach the server: " + err.message + ". Try again.");
    } finally {
      busy = false;
    }
  });

  // Decided elsewhere, or the thread ran on: read the page again, unless it would lose what
  // is being typed (then say so).
  follow.addEventListener("changed", async () => {
    if (busy) return;
    if (dirty()) {
      const state = document.getElementById("state");
      if (state) state.textContent = "This step changed meanwhile: reload to see it (what you typed is not sent).";
      document.getElementById("live").classList.add("moving");
      return;
    }
    const response = await fetch(location.pathname, { credentials: "same-origin" }).catch(() => null);
    if (response && response.ok && !busy && !dirty()) swap(await response.text(), null);
  });
}

document.addEventListener("DOMContentLoaded", () => {
  const queue = document.getElementById("queue");
  if (queue && queue.dataset.live) queuePage(queue);
  const live = document.getElementById("live");
  if (live && live.dataset.follow && live.dataset.step) stepPage(live);
  else if (live && live.dataset.follow) itemPage(live);
});
